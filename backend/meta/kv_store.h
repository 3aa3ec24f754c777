// KvStore: the transactional key-value seam under MetaStore.
//
// MetaStore keeps every record (backend/meta/meta_schema.h) in an ordered
// byte-string map behind this interface, so the same MetaStore code runs on
// an embedded RocksDB (backend/meta/rocks_kv.h, one process) or on etcd
// (backend/meta/etcd_kv.h, shared by any number of metads).
//
// Model: optimistic transactions. A KvTxn reads (Get, Scan) and buffers
// writes; Commit applies all writes atomically if and only if nothing the
// transaction read has changed since it read it, and otherwise returns
// kKvConflict without writing anything, so the caller re-runs the whole
// read-modify-write. Reads inside one transaction see one consistent state.
// Known limit: a range read detects keys added or changed in the range, not
// keys deleted from it; MetaStore guards every range it reads with a point
// read of the owning inode record, which every deletion rewrites.
//
// Durability: Commit returns a ticket; the change is durable once
// WaitDurable(ticket) returns (RocksDB: a shared WAL fsync, group commit;
// etcd: at once, Raft has committed it to a quorum's disks).
//
// Limits: an engine may bound one transaction (etcd: 128 operations and
// 1.5 MiB per request by default); limits() says how much, and Commit fails
// with EFBIG rather than send a transaction over them. DeleteRange counts as
// one operation.
//
// Thread-safety: a KvStore may be used from many threads; a KvTxn or
// KvReader by one thread at a time. Both must not outlive their KvStore.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace stripefs {

// Status code of a commit that lost to a concurrent change (retry it).
inline constexpr int kKvConflict = EAGAIN;

struct KvPair {
  std::string key;
  std::string value;
};

struct KvLimits {
  size_t max_ops = 0;    // writes per transaction, 0 = unbounded
  size_t max_bytes = 0;  // encoded request bytes, 0 = unbounded
};

// Reads at one consistent point in time.
class KvReader {
 public:
  virtual ~KvReader() = default;
  // The value of `key`, nullopt if absent.
  virtual Result<std::optional<std::string>> Get(const std::string& key) = 0;
  // The pairs with start <= key < end in key order, at most `limit` of them
  // (0 = all).
  virtual Result<std::vector<KvPair>> Scan(const std::string& start,
                                           const std::string& end,
                                           size_t limit) = 0;
};

class KvTxn : public KvReader {
 public:
  virtual void Put(const std::string& key, std::string value) = 0;
  virtual void Delete(const std::string& key) = 0;
  // Deletes every key in [start, end).
  virtual void DeleteRange(const std::string& start,
                           const std::string& end) = 0;
  // Write operations buffered so far (a DeleteRange counts once).
  virtual size_t ops() const = 0;
  // Applies the buffered writes if nothing read has changed; kKvConflict
  // otherwise. Returns the ticket to pass to KvStore::WaitDurable. A
  // transaction without writes commits trivially. Call at most once.
  virtual Result<uint64_t> Commit() = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;
  // Latest value of one key (no snapshot; cheapest read).
  virtual Result<std::optional<std::string>> Get(const std::string& key) = 0;
  virtual std::unique_ptr<KvReader> Snapshot() = 0;
  virtual std::unique_ptr<KvTxn> Begin() = 0;
  // The ticket of the last commit made through this store.
  virtual uint64_t last_ticket() const = 0;
  // Returns once commit `ticket` and every earlier one are durable.
  virtual Status WaitDurable(uint64_t ticket) = 0;
  virtual KvLimits limits() const = 0;
  // Commits made and durability syncs that covered them (group commit).
  virtual uint64_t syncs() const = 0;
  // Where the data lives, for messages ("RocksDB /x/meta", "etcd ...").
  virtual std::string Describe() const = 0;
  // True unless a commit made now would return without sleeping: an
  // engine in this process whose writes are neither stopped nor delayed
  // (RocksDB write stall) right now. A hint, checked per request by
  // MetaStore::InlineCapabilities; the default (etcd: a network round trip)
  // is true.
  virtual bool WritesMayBlock() const { return true; }
};

}  // namespace stripefs

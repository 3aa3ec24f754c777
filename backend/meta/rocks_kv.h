// RocksKv: the KvStore engine on an embedded RocksDB (one process).
//
// Owns the RocksDB instance in one directory (RocksDB's LOCK file keeps a
// second process out). Commits are written without a sync and made durable
// by WaitDurable, where one WAL fsync covers every commit applied before it
// (group commit), so concurrent mutations share fsyncs.
//
// Transactions use a sequence check: a transaction remembers RocksDB's
// latest sequence number when it starts; Commit (under one commit mutex)
// refuses with kKvConflict if any write happened since and the transaction
// read anything. MetaStore serialises its mutations, so in practice this
// never fires; it keeps the engine honest on its own. Reads in a
// transaction see the latest state (consistent, since nothing may have been
// written in between for the commit to succeed).
//
// Thread-safety: as KvStore.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "backend/meta/kv_store.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace stripefs {

class RocksKv final : public KvStore {
 public:
  // Opens the database in `dir`; with `create`, makes a new one (EEXIST if
  // one is there). EBUSY if another process has it open.
  static Result<std::unique_ptr<RocksKv>> Open(const std::string& dir,
                                               bool create);
  // True if `dir` looks like a RocksDB database (has a CURRENT file).
  static bool Exists(const std::string& dir);

  ~RocksKv() override;
  RocksKv(const RocksKv&) = delete;
  RocksKv& operator=(const RocksKv&) = delete;

  Result<std::optional<std::string>> Get(const std::string& key) override;
  std::unique_ptr<KvReader> Snapshot() override;
  std::unique_ptr<KvTxn> Begin() override;
  uint64_t last_ticket() const override { return written_seq_.load(); }
  Status WaitDurable(uint64_t ticket) override;
  KvLimits limits() const override { return {}; }
  uint64_t syncs() const override { return wal_syncs_.load(); }
  std::string Describe() const override { return "RocksDB " + dir_; }
  // Writes stopped or delayed by RocksDB (too many L0 files or memtables
  // waiting for a flush): rocksdb.is-write-stopped and
  // rocksdb.actual-delayed-write-rate.
  bool WritesMayBlock() const override;

  // Test hook: runs in the group-commit leader just before it syncs the WAL
  // (without any lock held), so tests can make followers join one sync.
  void set_before_wal_sync(std::function<void()> f) {
    before_wal_sync_ = std::move(f);
  }

 private:
  class Txn;
  class Reader;
  RocksKv(std::string dir, std::unique_ptr<rocksdb::DB> db);

  const std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::function<void()> before_wal_sync_;

  std::mutex commit_mu_;  // serialises the check-and-write of commits
  // Number of batches written; changed under commit_mu_.
  std::atomic<uint64_t> written_seq_{0};

  std::mutex sync_mu_;  // guards the fields below; never held with commit_mu_
  std::condition_variable sync_cv_;
  bool syncing_ = false;
  uint64_t synced_seq_ = 0;  // batches known to be in the synced WAL
  std::atomic<uint64_t> wal_syncs_{0};
};

}  // namespace stripefs

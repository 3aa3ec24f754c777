// The two ways MetaStore's parts touch the key-value store: a Mutation (one
// atomic read-modify-write of several records, committed as one
// transaction) and a SnapshotReader (consistent multi-record reads). Private
// to backend/meta/meta_store*.cc; the concern files are
//   meta_store.cc            lifecycle: create, open, volume UUID,
//                            statistics shards, background WAL sync
//   meta_store_cluster.cc    cluster map and leader lease
//   meta_store_namespace.cc  lookup, readdir, create, link, unlink, rmdir,
//                            rename
//   meta_store_attrs.cc      getattr, setattr, xattrs (ACLs are xattrs)
//   meta_store_purge.cc      orphans and their purge
//   meta_store_stripes.cc    stripe versions, the stripe map, its commits
// and MetaStore's collaborators with state of their own, each GUARDED_BY
// its mu_: VersionReservation (version_reservation.h) and InodeLease
// (inode_lease.h).
//
// Ownership: a Mutation borrows its MetaStore and owns one KvTxn; a
// SnapshotReader owns one KvReader. Both live on one thread for one call.
//
// Thread-safety: a Mutation must be made and committed with the store's mu_
// held (it takes inode numbers from the store's lease and gives unused ones
// back). A SnapshotReader needs no lock.
//
// Durability: Commit() only applies the transaction; MetaStore::Mutate
// waits for the WAL sync (group commit) after dropping mu_.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/meta/kv_store.h"
#include "backend/meta/meta_schema.h"
#include "backend/meta/meta_store.h"
#include "backend/meta/meta_types.h"
#include "common/status.h"

namespace stripefs {

namespace meta_internal {

// The wall clock as an inode timestamp.
Timespec Now();
inline bool IsDir(uint32_t mode) { return S_ISDIR(mode); }
inline bool IsReg(uint32_t mode) { return S_ISREG(mode); }
inline std::string InoStr(uint64_t ino) {
  return "inode " + std::to_string(ino);
}

// Reads through one snapshot, so multi-record reads are consistent.
class SnapshotReader {
 public:
  explicit SnapshotReader(KvStore* kv) : r_(kv->Snapshot()) {}

  // ENOENT (with `what`) if missing.
  Result<std::string> Get(const std::string& key, const std::string& what);
  Result<meta_schema::InodeRecord> Inode(uint64_t ino);
  // Inode(ino), ENOTDIR unless it is a directory.
  Result<meta_schema::InodeRecord> Dir(uint64_t ino);
  // The pairs in [start, end) in the snapshot, at most `limit` (0 = all).
  Result<std::vector<KvPair>> Range(const std::string& start,
                                    const std::string& end, size_t limit = 0) {
    return r_->Scan(start, end, limit);
  }

 private:
  std::unique_ptr<KvReader> r_;
};

}  // namespace meta_internal

// One atomic change: inode records are loaded once, modified in memory and
// written together with every other change in a single transaction. The
// volume statistics (this MetaStore's record of them) are read into the
// transaction only when the change needs them; inode numbers come from the
// MetaStore's leased block. Must be used with mu_ held.
class MetaStore::Mutation {
 public:
  using InodeRecord = meta_schema::InodeRecord;
  using DentryValue = meta_schema::DentryValue;

  explicit Mutation(MetaStore* s);
  // A mutation that did not commit gives its inode numbers back, so a
  // re-run after a conflict takes the same ones (no gap per conflict).
  ~Mutation();
  Mutation(const Mutation&) = delete;
  Mutation& operator=(const Mutation&) = delete;

  const Timespec& now() const { return now_; }
  KvTxn& txn() { return *txn_; }
  // This MetaStore's statistics record, read on first use.
  FsStats& stats();

  Result<InodeRecord*> Inode(uint64_t ino);
  // Like Inode() and marks it to be written back.
  Result<InodeRecord*> Modify(uint64_t ino);
  // Modify(), ENOTDIR unless it is a directory.
  Result<InodeRecord*> ModifyDir(uint64_t ino);
  // A new inode (number from the lease, timestamps now, counted in stats).
  Result<InodeRecord*> NewInode();
  // Deletes the inode record and its symlink target, xattrs and orphan mark
  // (not its stripes: see DropStripesFrom).
  Status DeleteInode(uint64_t ino);
  // A removed (empty) directory stays as an orphan with nlink 0 until
  // PurgeInode, so that handles still open on it keep working.
  Status OrphanDirectory(uint64_t ino);

  Result<std::optional<DentryValue>> GetDentry(uint64_t parent,
                                               const std::string& name);
  void PutDentry(uint64_t parent, const std::string& name,
                 const DentryValue& d);
  void DeleteDentry(uint64_t parent, const std::string& name, uint64_t seq);
  Result<bool> DirIsEmpty(uint64_t dir);

  // Writes the dirty inodes and changed statistics and commits.
  Status Commit();

 private:
  MetaStore* store_;
  std::vector<uint64_t> taken_;  // inode numbers this mutation took
  bool committed_ = false;
  std::unique_ptr<KvTxn> txn_;
  // Statistics read on first use; an error is kept and returned by Commit
  // (callers use them as plain fields).
  FsStats stats_;
  FsStats loaded_stats_;
  bool stats_loaded_ = false;
  Status counter_error_;
  Timespec now_;
  std::map<uint64_t, InodeRecord> inodes_;
  std::set<uint64_t> dirty_;
  std::set<uint64_t> deleted_;
};

}  // namespace stripefs

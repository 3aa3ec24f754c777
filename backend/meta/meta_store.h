// MetaStore: the MetaService of one volume, kept in a transactional
// key-value store (backend/meta/kv_store.h).
//
// Used in process by the embedded mount and by metad. `location` names the
// store: a directory holds an embedded RocksDB (RocksKv; its LOCK file keeps
// a second process out); "etcd://host:port[,host:port...]/prefix" names a
// volume kept in etcd under that key prefix (EtcdKv), which any number of
// MetaStores in any number of processes may serve at once. Every mutation
// is one optimistic transaction, durable before the method returns, so an
// acknowledged change survives a crash and a crash never leaves half a
// change; a transaction that lost to a concurrent change elsewhere is re-run.
// Key schema: backend/meta/meta_schema.h and docs/metadata.md.
//
// Thread-safety: all methods may be called from many threads. Mutations are
// serialised per MetaStore by one mutex (each is a read-modify-write of
// several records) and then wait, without it, for durability (RocksDB: a
// shared WAL fsync, group commit). Reads run without the mutex (multi-record
// reads on a snapshot); on RocksDB they may observe a change whose method
// has not returned yet (it is applied before it is synced).
//
// Durability: by default every mutation is durable when it returns. With
// MetaStoreOptions::namespace_sync_delay, namespace mutations return once
// written (safe from a process crash) and are synced within that delay, by
// Sync(), or by the next durable mutation.
//
// Implementation: one file per concern, meta_store*.cc (the list is in
// meta_store_mutation.h, which holds the transaction helpers they share).
//
// Known limit: on an engine with a per-transaction bound (etcd), a
// CommitStripes larger than the bound is committed in several atomic groups
// (each stripe is still all-or-nothing; see docs/metadata.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/meta/inode_lease.h"
#include "backend/meta/kv_retry.h"
#include "backend/meta/kv_store.h"
#include "backend/meta/meta_schema.h"
#include "backend/meta/meta_service.h"
#include "backend/meta/meta_types.h"
#include "backend/meta/version_reservation.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs {

struct MetaStoreOptions {
  // etcd only: allow a plaintext etcd:// location (no TLS, no etcd user)
  // when every endpoint is a loopback address (--etcd-insecure); refused
  // otherwise, as is any plaintext location off loopback (etcd_kv.h).
  bool etcd_insecure_loopback = false;
  // Owner and permission bits of the root directory made by Create.
  uint32_t root_uid = 0;
  uint32_t root_gid = 0;
  uint32_t root_mode = 0755;
  // Sync the WAL on every mutation. Only tests and benchmarks that do not
  // care about durability should turn this off.
  bool sync = true;
  // Stripe versions reserved per durable counter write in AllocateVersions
  // (numbers reserved but not handed out before a crash are skipped).
  uint32_t version_batch = 4096;
  // Inode numbers leased per transaction on M next_inode; each MetaStore
  // hands out its own block, so creates on different metads do not write a
  // shared counter. A crash or close leaks at most the rest of one block.
  uint32_t inode_batch = 1024;
  // Namespace mutations (create, mkdir, symlink, link, unlink, rmdir,
  // rename, setattr without a size change, xattrs, purges) are acknowledged
  // once their WAL record is written (to the page cache, so a kill -9 of
  // the process loses none of them), before the WAL is synced; a background
  // thread syncs it every `namespace_sync_delay`, which bounds what a power
  // loss can take, as a local file system's journal commit does. Sync()
  // (fsync, fsyncdir, syncfs) and every durable mutation (stripe commits,
  // truncation, version reservations) sync the WAL, and since the WAL is one
  // sequence that covers every earlier namespace mutation too. Zero (the
  // default): every mutation is synced before it returns. No effect on etcd,
  // where every commit is Raft-durable when it returns. docs/metadata.md,
  // "Durability of namespace operations".
  std::chrono::milliseconds namespace_sync_delay{0};
  // Test hook: runs in the group-commit leader just before it syncs the WAL
  // (without any lock held), so tests can make followers join one sync.
  std::function<void()> before_wal_sync;
};

// How many mutations were written and how many WAL syncs made them durable
// (group commit: one sync covers every mutation applied before it).
struct MetaCommitStats {
  uint64_t mutations = 0;
  uint64_t wal_syncs = 0;
  uint64_t conflicts = 0;  // mutations re-run after losing a conflict
  // Inode-block leases re-run after losing to another MetaStore's lease
  // (one lease per inode_batch creates).
  uint64_t lease_conflicts = 0;
};

class MetaStore final : public MetaService {
 public:
  // Makes a new volume's metadata store in `dir` (created if missing).
  // EEXIST if `dir` already holds one; EINVAL for an unsupported geometry.
  static Result<std::unique_ptr<MetaStore>> Create(
      const std::string& dir, const Geometry& geometry,
      const MetaStoreOptions& options = {});
  // Opens an existing store. ENOENT if `dir` holds none; EINVAL if it is not
  // a stripefs metadata store or has another format version; EBUSY if
  // another process has it open.
  static Result<std::unique_ptr<MetaStore>> Open(
      const std::string& dir, const MetaStoreOptions& options = {});
  // Opens `dir` if it holds a store (EINVAL if its geometry differs from
  // `geometry`), otherwise creates one.
  static Result<std::unique_ptr<MetaStore>> OpenOrCreate(
      const std::string& dir, const Geometry& geometry,
      const MetaStoreOptions& options = {});
  // True if `dir` holds a metadata store (a RocksDB CURRENT file, or for an
  // etcd location a reachable etcd with a volume under the prefix).
  static bool Exists(const std::string& dir,
                     const MetaStoreOptions& options = {});
  // True if `location` names an etcd volume rather than a directory.
  static bool IsEtcdLocation(const std::string& location);

  ~MetaStore() override;
  MetaStore(const MetaStore&) = delete;
  MetaStore& operator=(const MetaStore&) = delete;

  // --- MetaService ----------------------------------------------------------
  Result<Geometry> GetGeometry() override;
  // The volume's UUID (immutable once open, never all zero: an older volume
  // gets one when it is opened).
  const VolumeUuid& volume_uuid() const { return volume_uuid_; }
  Result<ClusterMap> GetClusterMap() override;
  Status UpsertServer(const ServerInfo& info) override;
  Status SetServerState(uint32_t id, ServerState state) override;
  // Sets the state of the server only if its map entry still equals `seen`
  // (same address, domain and state), atomically with other map changes:
  // the health monitor uses it so a probe result never overrides an
  // operator's `out` or a re-registration that happened meanwhile.
  // Returns true if the state changed (epoch bumped), false if the entry
  // differs from `seen` or is gone.
  Result<bool> SetServerStateIf(const ServerInfo& seen, ServerState state);
  // Takes or renews the volume's leader lease for `holder` (until now +
  // `ttl`, wall clock) if it is free, expired or already `holder`'s, as one
  // transaction: of the metads sharing a volume at most one holds it at a
  // time (given clocks that agree to well within `ttl`). Returns whether
  // `holder` holds it now.
  Result<bool> HoldLeadership(const std::string& holder,
                              std::chrono::milliseconds ttl);

  Result<InodeAttr> Lookup(uint64_t parent, const std::string& name) override;
  Result<InodeAttr> GetAttr(uint64_t ino) override;
  Result<InodeAttr> SetAttr(uint64_t ino, const SetAttrRequest& req,
                            std::vector<ObsoleteStripe>* obsolete) override;
  Result<InodeAttr> MkNode(uint64_t parent, const std::string& name,
                           uint32_t mode, uint32_t uid, uint32_t gid,
                           uint32_t rdev) override;
  Result<InodeAttr> Mkdir(uint64_t parent, const std::string& name,
                          uint32_t mode, uint32_t uid, uint32_t gid) override;
  Result<InodeAttr> Symlink(uint64_t parent, const std::string& name,
                            const std::string& target, uint32_t uid,
                            uint32_t gid) override;
  Result<std::string> ReadLink(uint64_t ino) override;
  Result<InodeAttr> Link(uint64_t ino, uint64_t new_parent,
                         const std::string& new_name) override;
  Result<InodeAttr> Unlink(uint64_t parent, const std::string& name) override;
  Result<EntryChange> CreateEntry(const CreateEntryRequest& req) override;
  Result<EntryChange> UnlinkEntry(uint64_t parent,
                                  const std::string& name) override;
  Status Rmdir(uint64_t parent, const std::string& name) override;
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                const std::string& new_name, uint32_t flags,
                uint64_t* replaced) override;
  Result<EntryChange> LinkEntry(uint64_t ino, uint64_t new_parent,
                                const std::string& new_name) override;
  Result<RenameChange> RenameEntry(uint64_t parent, const std::string& name,
                                   uint64_t new_parent,
                                   const std::string& new_name,
                                   uint32_t flags) override;
  Result<std::vector<DirEntry>> ReadDir(uint64_t ino, uint64_t cookie,
                                        uint32_t max_entries) override;
  Status PurgeInode(uint64_t ino,
                    std::vector<ObsoleteStripe>* obsolete) override;
  // One transaction (one WAL sync) for all of `inos` on RocksDB; groups of
  // at most limits().max_ops / kPurgeOpsPerInode inodes on etcd.
  Status PurgeInodes(const std::vector<uint64_t>& inos,
                     std::vector<int32_t>* codes,
                     std::vector<ObsoleteStripe>* obsolete) override;
  // One snapshot for the whole group; Sync() after it when a listed orphan
  // has stripes (or E2BIG), not for a group of empty files.
  Status ListOrphanStripes(const std::vector<uint64_t>& inos,
                           std::vector<int32_t>* codes,
                           std::vector<ObsoleteStripe>* stripes) override;
  Result<std::vector<uint64_t>> ListOrphans() override;
  Result<FsStats> StatFs() override;
  Status Sync() override;

  Status SetXattr(uint64_t ino, const std::string& name,
                  const std::string& value, uint32_t flags) override;
  Result<std::string> GetXattr(uint64_t ino, const std::string& name) override;
  Result<std::vector<std::string>> ListXattr(uint64_t ino) override;
  Status RemoveXattr(uint64_t ino, const std::string& name) override;

  Result<uint64_t> AllocateVersions(uint32_t count) override;
  Result<std::vector<StripeVersion>> GetStripes(uint64_t ino, uint64_t first,
                                                uint64_t count) override;
  Status CommitStripe(uint64_t ino, const StripeVersion& sv,
                      uint64_t expected_version, uint64_t min_file_size,
                      ObsoleteStripe* obsolete) override;
  Status CommitStripes(uint64_t ino, const std::vector<StripeCommit>& commits,
                       uint64_t min_file_size,
                       std::vector<ObsoleteStripe>* obsolete) override;
  Status CommitStripesKeepTimes(uint64_t ino,
                                const std::vector<StripeCommit>& commits,
                                uint64_t min_file_size,
                                std::vector<ObsoleteStripe>* obsolete) override;
  Status SetStripeMissing(uint64_t ino, uint64_t stripe, uint64_t version,
                          uint32_t missing_mask) override;
  Status DropStripes(uint64_t ino, uint64_t first, uint64_t count,
                     std::vector<ObsoleteStripe>* obsolete) override;
  Status DropStripesKeepTimes(uint64_t ino, uint64_t first, uint64_t count,
                              std::vector<ObsoleteStripe>* obsolete) override;
  Result<std::vector<StripeRef>> ListStripes(uint64_t after_inode,
                                             uint64_t after_stripe,
                                             uint32_t limit) override;

  // RocksDB: reads always; namespace mutations when they are acknowledged
  // before their WAL sync (namespace_sync_delay > 0, or sync off) and
  // RocksDB is not stalling writes. They still take mu_, so one may wait
  // for another thread's mutation to finish its in-memory writes (never for
  // a WAL sync, which runs without mu_). etcd: nothing (network).
  MetaInlineCaps InlineCapabilities() const override;

  MetaCommitStats commit_stats() const {
    return {kv_->last_ticket(), kv_->syncs(),
            conflicts_.load(std::memory_order_relaxed),
            lease_conflicts_.load(std::memory_order_relaxed)};
  }

  // The directory this store lives in.
  const std::string& dir() const { return dir_; }

 private:
  class Mutation;  // one atomic change under mu_: meta_store_mutation.h

  MetaStore(std::string dir, MetaStoreOptions options,
            std::unique_ptr<KvStore> kv);
  // Opens (or with `create` makes) the key-value store `location` names.
  static Result<std::unique_ptr<KvStore>> OpenKv(
      const std::string& location, bool create,
      const MetaStoreOptions& options);
  // Whether `dir` holds a store; unlike Exists, an etcd that cannot be
  // reached or refuses access is an error, not "no".
  static Result<bool> Holds(const std::string& dir,
                            const MetaStoreOptions& options);
  Status LoadState();
  // Reads M volume_uuid, writing a new one first for an older volume.
  Status LoadVolumeUuid();
  // Adds every stats shard into the base record and deletes the shards
  // (batches within the engine's transaction bound). Safe while other
  // MetaStores run: shard updates are read-modify-writes, so they conflict.
  Status FoldStatsShards();
  // Point read of the latest value; NotFound -> ENOENT with `what`.
  Result<std::string> Get(const std::string& key, const std::string& what);
  static const Status& StatusOf(const Status& s) { return s; }
  template <typename T>
  static Status StatusOf(const Result<T>& r) {
    return r.status();
  }
  // Runs `f` (a read-modify-write transaction) under mu_, re-running it
  // while it loses to concurrent changes made elsewhere (kKvConflict, a
  // bounded number of times), then - without mu_ - waits until everything
  // committed so far is durable, so one WAL fsync serves all concurrent
  // mutations (group commit). Waiting for all writes, not just f's, means a
  // result that depended on another mutation's change is never returned
  // before that change is durable. `f` must reset its outputs when it runs.
  // Which acknowledgement a mutation needs: kDurable waits for the WAL sync
  // (stripe map, version and server records, truncation: chunks are deleted
  // on the strength of them); kNamespace may return before it when
  // options_.namespace_sync_delay is set (see MetaStoreOptions).
  enum class Ack { kDurable, kNamespace };
  // `f` runs with mu_ held; the analysis cannot see that from inside the
  // lambda, so an `f` that touches mu_'s fields starts with
  // mu_.AssertHeld().
  template <typename F>
  STRIPEFS_EXCLUDES(mu_)
  auto Mutate(F&& f, Ack ack = Ack::kDurable) -> decltype(f()) {
    uint64_t target = 0;
    auto result = [&] {
      MutexLock lock(&mu_);
      for (int attempt = 1;; ++attempt) {
        auto r = f();
        if (StatusOf(r).code() != kKvConflict || attempt == kKvMaxAttempts) {
          target = kv_->last_ticket();
          return r;
        }
        conflicts_.fetch_add(1, std::memory_order_relaxed);
        KvBackOff(attempt);
      }
    }();
    if (options_.sync &&
        (ack == Ack::kDurable || options_.namespace_sync_delay.count() == 0)) {
      Status st = kv_->WaitDurable(target);
      if (!st.ok()) return st;
    }
    return result;
  }
  // Mutate for a namespace mutation (Ack::kNamespace); with `durable`, one
  // that must be synced anyway (a truncation: chunks go on its strength).
  template <typename F>
  auto MutateNamespace(F&& f) -> decltype(f()) {
    return Mutate(std::forward<F>(f), Ack::kNamespace);
  }
  template <typename F>
  auto MutateNamespace(bool durable, F&& f) -> decltype(f()) {
    return Mutate(std::forward<F>(f),
                  durable ? Ack::kDurable : Ack::kNamespace);
  }
  // Argument checks of one stripe of a commit that need no state.
  Status ValidateStripeCommit(const StripeCommit& c) const;
  // MkNode with an empty name: an O_TMPFILE inode (nlink 0, an orphan).
  Result<InodeAttr> CreateAnonymous(uint64_t parent, uint32_t mode,
                                    uint32_t uid, uint32_t gid);
  Status PutWhiteout(Mutation& m, uint64_t parent, const std::string& name,
                     const meta_schema::InodeRecord& moved,
                     meta_schema::InodeRecord* pdir);
  // flags: CreateEntryFlags, applied to the parent inside the transaction.
  Result<EntryChange> CreateNode(uint64_t parent, const std::string& name,
                                 uint32_t mode, uint32_t uid, uint32_t gid,
                                 uint32_t rdev, const std::string* symlink,
                                 uint32_t flags = 0);
  // Drops stripes of `ino` with index in [first_dropped, end_stripe) in m's
  // transaction.
  Status DropStripesFrom(
      Mutation& m, uint64_t ino, uint64_t first_dropped,
      std::vector<ObsoleteStripe>* obsolete,
      uint64_t end_stripe = std::numeric_limits<uint64_t>::max());
  // Purges orphan `ino` in m's transaction (EBUSY if linked); appends its
  // stripes to `dropped` (nothing written or appended on error).
  Status PurgeOne(Mutation& m, uint64_t ino,
                  std::vector<ObsoleteStripe>* dropped);
  // One atomic group of PurgeInodes: codes[i] for inos[i].
  Status PurgeInodeGroup(const uint64_t* inos, size_t n, int32_t* codes,
                         std::vector<ObsoleteStripe>* dropped);
  // CommitStripes(KeepTimes): `stamp` sets mtime and ctime to now.
  Status CommitStripesImpl(uint64_t ino,
                           const std::vector<StripeCommit>& commits,
                           uint64_t min_file_size, bool stamp,
                           std::vector<ObsoleteStripe>* obsolete);
  // One atomic group of CommitStripes; appends what it replaced.
  Status CommitStripeGroup(uint64_t ino, const StripeCommit* commits, size_t n,
                           uint64_t min_file_size, bool stamp,
                           std::vector<ObsoleteStripe>* replaced);
  // DropStripes(KeepTimes): `stamp` sets mtime and ctime to now.
  Status DropStripesImpl(uint64_t ino, uint64_t first, uint64_t count,
                         bool stamp, std::vector<ObsoleteStripe>* obsolete);
  // Whether `ancestor` is `ino` or one of its ancestors (via '..').
  Result<bool> IsAncestor(Mutation& m, uint64_t ancestor, uint64_t ino);
  // Rename's steps, in m's transaction. RenameSides: the names, their
  // directories and entries (meta_store_namespace.cc).
  struct RenameSides;
  // EINVAL if the rename would move a directory into its own subtree.
  Status CheckRenameLoops(Mutation& m, const RenameSides& r, bool exchange);
  // RENAME_EXCHANGE: the two entries swap targets.
  Status RenameExchange(Mutation& m, const RenameSides& r);
  // A plain rename (replacing the target if any, leaving a whiteout if
  // asked); the replaced inode in out->replaced (and replaced_attr).
  Status RenameMove(Mutation& m, const RenameSides& r, bool whiteout,
                    RenameChange* out);

  // Syncs the WAL every options_.namespace_sync_delay until stopping_.
  void SyncLoop() STRIPEFS_EXCLUDES(syncer_mu_);

  const std::string dir_;
  const MetaStoreOptions options_;
  std::unique_ptr<KvStore> kv_;
  Geometry geometry_;         // immutable once the volume exists
  VolumeUuid volume_uuid_{};  // immutable once open

  Mutex mu_;  // serialises mutations (Mutate, AllocateVersions)
  // The stripe versions and inode numbers this MetaStore hands out.
  VersionReservation versions_ STRIPEFS_GUARDED_BY(mu_);
  InodeLease inodes_ STRIPEFS_GUARDED_BY(mu_);
  // The stats record this MetaStore writes: the base M stats on RocksDB
  // (one process), its own shard M stats/<random id> on etcd. Set by
  // LoadState before the store is shared, then immutable.
  std::string stats_key_;
  std::atomic<uint64_t> conflicts_{0};
  std::atomic<uint64_t> lease_conflicts_{0};

  // The background WAL sync of lazily acknowledged namespace mutations.
  Mutex syncer_mu_;
  std::condition_variable syncer_cv_;
  bool stopping_ STRIPEFS_GUARDED_BY(syncer_mu_) = false;
  std::thread syncer_;  // runs only with a namespace_sync_delay
};

}  // namespace stripefs

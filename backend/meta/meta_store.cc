// MetaStore's lifecycle: create, open and state loading, the volume UUID,
// the statistics record and its shards, and the background WAL sync of
// lazily acknowledged namespace mutations. The other
// operations live in meta_store_*.cc (list in meta_store_mutation.h).
#include "backend/meta/meta_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "backend/meta/etcd_kv.h"
#include "backend/meta/meta_store_mutation.h"
#include "backend/meta/rocks_kv.h"
#include "common/durable_dirs.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)
using meta_internal::Now;

namespace {

// 16 bytes from the OS's random source (std::random_device is getrandom
// on Linux): the value of M volume_uuid.
std::string NewVolumeUuid() {
  std::random_device rd;
  std::string u(16, '\0');
  for (size_t i = 0; i < u.size(); i += 4) {
    uint32_t r = rd();
    std::memcpy(u.data() + i, &r, 4);
  }
  return u;
}

}  // namespace

MetaStore::MetaStore(std::string dir, MetaStoreOptions options,
                     std::unique_ptr<KvStore> kv)
    : dir_(std::move(dir)),
      options_(options),
      kv_(std::move(kv)),
      versions_(kv_.get(), options_.version_batch),
      inodes_(kv_.get(), options_.inode_batch) {
  if (options_.sync && options_.namespace_sync_delay.count() > 0) {
    syncer_ = std::thread([this] { SyncLoop(); });
  }
}

MetaStore::~MetaStore() {
  if (syncer_.joinable()) {
    {
      MutexLock lock(&syncer_mu_);
      stopping_ = true;
    }
    syncer_cv_.notify_all();
    syncer_.join();
    (void)Sync();  // a clean stop leaves nothing unsynced
  }
}

void MetaStore::SyncLoop() {
  UniqueMutexLock lock(&syncer_mu_);
  while (
      !syncer_cv_.wait_for(lock.native(), options_.namespace_sync_delay, [&] {
        syncer_mu_.AssertHeld();
        return stopping_;
      })) {
    lock.Unlock();
    // Cheap when nothing new was written (WaitDurable returns at once). A
    // failed sync is retried next round and reported by the next Sync().
    (void)kv_->WaitDurable(kv_->last_ticket());
    lock.Lock();
  }
}

MetaInlineCaps MetaStore::InlineCapabilities() const {
  MetaInlineCaps caps;
  if (IsEtcdLocation(dir_)) return caps;
  caps.reads = true;
  caps.namespace_writes =
      (!options_.sync || options_.namespace_sync_delay.count() > 0) &&
      !kv_->WritesMayBlock();
  return caps;
}

Status MetaStore::Sync() { return kv_->WaitDurable(kv_->last_ticket()); }

bool MetaStore::IsEtcdLocation(const std::string& location) {
  return IsEtcdLocationText(location);
}

bool MetaStore::Exists(const std::string& dir,
                       const MetaStoreOptions& options) {
  auto held = Holds(dir, options);
  return held.ok() && *held;
}

Result<bool> MetaStore::Holds(const std::string& dir,
                              const MetaStoreOptions& options) {
  if (!IsEtcdLocation(dir)) return RocksKv::Exists(dir);
  STRIPEFS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> kv,
                            OpenKv(dir, /*create=*/false, options));
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                            kv->Get(MetaKey(kMetaFormat)));
  return v.has_value();
}

Result<std::unique_ptr<KvStore>> MetaStore::OpenKv(
    const std::string& location, bool create, const MetaStoreOptions& options) {
  if (IsEtcdLocation(location)) {
    STRIPEFS_ASSIGN_OR_RETURN(EtcdLocation where, ParseEtcdLocation(location));
    where.insecure_loopback_ok = options.etcd_insecure_loopback;
    return ConnectEtcd(where);
  }
  STRIPEFS_ASSIGN_OR_RETURN(std::unique_ptr<RocksKv> kv,
                            RocksKv::Open(location, create));
  return std::unique_ptr<KvStore>(std::move(kv));
}

Result<std::unique_ptr<MetaStore>> MetaStore::Create(
    const std::string& dir, const Geometry& geometry,
    const MetaStoreOptions& options) {
  STRIPEFS_RETURN_IF_ERROR(ValidateGeometry(geometry));
  STRIPEFS_ASSIGN_OR_RETURN(bool exists, Holds(dir, options));
  if (exists) {
    return Status::Exists("a stripefs metadata store already exists in " + dir +
                          "; open it instead, or remove the directory "
                          "to start a new volume");
  }
  if (!IsEtcdLocation(dir)) {
    // Durable in its parent too: RocksDB syncs only what is inside.
    STRIPEFS_RETURN_IF_ERROR(MakeDirsDurably(dir, "metadata directory"));
  }
  STRIPEFS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> kv,
                            OpenKv(dir, /*create=*/true, options));
  // Everything a volume needs, in one transaction: a crash leaves either
  // nothing (Open reports "not a stripefs metadata store") or a complete
  // volume; of two concurrent creators on etcd, one wins.
  std::unique_ptr<KvTxn> b = kv->Begin();
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> format,
                            b->Get(MetaKey(kMetaFormat)));
  if (format) {
    return Status::Exists("a stripefs metadata store already exists in " + dir +
                          "; open it instead, or remove it to start a new "
                          "volume");
  }
  InodeRecord root;
  root.attr.ino = kRootInode;
  root.attr.mode = S_IFDIR | (options.root_mode & 07777);
  root.attr.uid = options.root_uid;
  root.attr.gid = options.root_gid;
  root.attr.nlink = 2;
  root.attr.generation = 1;
  root.attr.atime = root.attr.mtime = root.attr.ctime = Now();
  root.parent = kRootInode;
  root.next_seq = kFirstEntrySeq;
  b->Put(InodeKey(kRootInode), EncodeInode(root));
  b->Put(MetaKey(kMetaGeometry), EncodeGeometry(geometry));
  b->Put(MetaKey(kMetaNextInode), EncodeU64(kRootInode + 1));
  b->Put(MetaKey(kMetaVersionLimit), EncodeU64(1));
  b->Put(MetaKey(kMetaStats), EncodeStats(FsStats{1, 0}));
  // New volumes place by the balanced scheme; volumes created before it
  // keep the legacy one their map decodes to (placement.h).
  ClusterMap map;
  map.placement = PlacementScheme::kBalanced;
  map.placement_groups = kDefaultPlacementGroups;
  b->Put(MetaKey(kMetaCluster), EncodeClusterMap(map));
  b->Put(MetaKey(kMetaFormat), EncodeU32(kFormatVersion));
  b->Put(MetaKey(kMetaVolumeUuid), NewVolumeUuid());
  auto ticket = b->Commit();
  if (ticket.ok()) STRIPEFS_RETURN_IF_ERROR(kv->WaitDurable(*ticket));
  if (ticket.status().code() == kKvConflict) {
    return Status::Exists("another process created a volume in " + dir +
                          " at the same time; open it instead");
  }
  if (!ticket.ok()) {
    return Status(ticket.status().code(), "initialising metadata store " + dir +
                                              ": " + ticket.status().message());
  }
  std::unique_ptr<MetaStore> store(new MetaStore(dir, options, std::move(kv)));
  STRIPEFS_RETURN_IF_ERROR(store->LoadState());
  return store;
}

Result<std::unique_ptr<MetaStore>> MetaStore::Open(
    const std::string& dir, const MetaStoreOptions& options) {
  STRIPEFS_ASSIGN_OR_RETURN(bool exists, Holds(dir, options));
  if (!exists) {
    return Status::NotFound("no stripefs metadata store in " + dir +
                            " (create a volume first, e.g. `stripefs mkfs`)");
  }
  STRIPEFS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> kv,
                            OpenKv(dir, /*create=*/false, options));
  std::unique_ptr<MetaStore> store(new MetaStore(dir, options, std::move(kv)));
  STRIPEFS_RETURN_IF_ERROR(store->LoadState());
  return store;
}

Result<std::unique_ptr<MetaStore>> MetaStore::OpenOrCreate(
    const std::string& dir, const Geometry& geometry,
    const MetaStoreOptions& options) {
  STRIPEFS_ASSIGN_OR_RETURN(bool exists, Holds(dir, options));
  if (!exists) return Create(dir, geometry, options);
  STRIPEFS_ASSIGN_OR_RETURN(std::unique_ptr<MetaStore> store,
                            Open(dir, options));
  if (!(store->geometry_ == geometry)) {
    const Geometry& g = store->geometry_;
    return Status::InvalidArgument(
        "metadata store " + dir + " holds a volume with geometry " +
        std::to_string(g.k) + "+" + std::to_string(g.m) + " cell " +
        std::to_string(g.cell_size) + ", not the requested " +
        std::to_string(geometry.k) + "+" + std::to_string(geometry.m) +
        " cell " + std::to_string(geometry.cell_size) +
        "; open it with its own geometry");
  }
  return store;
}

Status MetaStore::LoadState() {
  if (options_.before_wal_sync && !IsEtcdLocation(dir_)) {
    static_cast<RocksKv*>(kv_.get())->set_before_wal_sync(
        options_.before_wal_sync);
  }
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> fv,
                            kv_->Get(MetaKey(kMetaFormat)));
  if (!fv) {
    return Status::InvalidArgument(
        kv_->Describe() +
        " is not a stripefs metadata store "
        "(or its creation was interrupted; remove it and create the "
        "volume again)");
  }
  std::string v = *fv;
  STRIPEFS_ASSIGN_OR_RETURN(uint32_t format, DecodeU32(v));
  if (format != kFormatVersion) {
    return Status::InvalidArgument(
        "metadata store " + dir_ + " has format version " +
        std::to_string(format) + " but this stripefs reads version " +
        std::to_string(kFormatVersion) + "; use a matching stripefs build");
  }
  STRIPEFS_ASSIGN_OR_RETURN(v, Get(MetaKey(kMetaGeometry), "geometry"));
  STRIPEFS_ASSIGN_OR_RETURN(geometry_, DecodeGeometry(v));
  STRIPEFS_ASSIGN_OR_RETURN(v,
                            Get(MetaKey(kMetaVersionLimit), "version counter"));
  STRIPEFS_ASSIGN_OR_RETURN(uint64_t version_limit, DecodeU64(v));
  {
    // Nobody else sees the store yet; the lock is for the analysis. No
    // inode block is leased yet: the first create leases one.
    MutexLock lock(&mu_);
    versions_.Resume(version_limit);
  }
  STRIPEFS_RETURN_IF_ERROR(LoadVolumeUuid());
  if (!IsEtcdLocation(dir_)) {
    stats_key_ = MetaKey(kMetaStats);  // one process: no shards
    return Status::Ok();
  }
  std::random_device rd;
  char id[17];
  snprintf(id, sizeof id, "%08x%08x", rd(), rd());
  stats_key_ = StatsShardKey(id);
  // Shards of MetaStores gone since (and of live ones: harmless) are folded
  // into the base, so their number stays near the number of live metads.
  return FoldStatsShards();
}

Status MetaStore::LoadVolumeUuid() {
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<KvTxn> txn = kv_->Begin();
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              txn->Get(MetaKey(kMetaVolumeUuid)));
    if (v) {
      if (v->size() != volume_uuid_.size())
        return Status::Corruption("volume UUID record of " +
                                  std::to_string(v->size()) + " bytes");
      std::memcpy(volume_uuid_.data(), v->data(), volume_uuid_.size());
      return Status::Ok();
    }
    // A volume made before volumes had a UUID gets one now.
    txn->Put(MetaKey(kMetaVolumeUuid), NewVolumeUuid());
    auto ticket = txn->Commit();
    if (ticket.status().code() == kKvConflict && attempt < kKvMaxAttempts) {
      KvBackOff(attempt);
      continue;  // another opener wrote it: read theirs
    }
    STRIPEFS_RETURN_IF_ERROR(ticket.status());
    STRIPEFS_RETURN_IF_ERROR(kv_->WaitDurable(*ticket));
  }
}

Status MetaStore::FoldStatsShards() {
  const std::string base_key = MetaKey(kMetaStats);
  const std::string start = MetaKey(kMetaStatsShard);
  const std::string end = PrefixEnd(start);
  // Each pass folds up to max_ops - 1 shards (their deletes plus the base).
  const size_t max_ops = kv_->limits().max_ops;
  const size_t per_txn = max_ops > 1 ? max_ops - 1 : 1000;
  for (int pass = 0; pass < 1000; ++pass) {
    bool more = false;
    Status st = Mutate([&]() -> Status {
      std::unique_ptr<KvTxn> txn = kv_->Begin();
      STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> bv,
                                txn->Get(base_key));
      if (!bv) return Status::Corruption("stats record is missing");
      STRIPEFS_ASSIGN_OR_RETURN(FsStats sum, DecodeStats(*bv));
      STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> shards,
                                txn->Scan(start, end, per_txn + 1));
      more = shards.size() > per_txn;
      if (more) shards.resize(per_txn);
      if (shards.empty()) return Status::Ok();
      for (const KvPair& p : shards) {
        STRIPEFS_ASSIGN_OR_RETURN(FsStats part, DecodeStats(p.value));
        sum = AddStats(sum, part);
        txn->Delete(p.key);
      }
      txn->Put(base_key, EncodeStats(sum));
      return txn->Commit().status();
    });
    STRIPEFS_RETURN_IF_ERROR(st);
    if (!more) return Status::Ok();
  }
  return Status::Ok();
}

Result<std::string> MetaStore::Get(const std::string& key,
                                   const std::string& what) {
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v, kv_->Get(key));
  if (!v) return Status::NotFound(what + " does not exist");
  return std::move(*v);
}

Result<FsStats> MetaStore::StatFs() {
  // The base record and every shard, summed (one consistent range read).
  const std::string start = MetaKey(kMetaStats);
  std::unique_ptr<KvReader> snap = kv_->Snapshot();
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> records,
                            snap->Scan(start, PrefixEnd(start), 0));
  if (records.empty() || records.front().key != start) {
    return Status::Corruption("statistics record is missing");
  }
  FsStats sum;
  for (const KvPair& p : records) {
    STRIPEFS_ASSIGN_OR_RETURN(FsStats part, DecodeStats(p.value));
    sum = AddStats(sum, part);
  }
  return sum;
}

}  // namespace stripefs

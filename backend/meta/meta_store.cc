#include "backend/meta/meta_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "backend/meta/etcd_kv.h"
#include "backend/meta/rocks_kv.h"
#include "common/durable_dirs.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)

namespace {

constexpr size_t kNameMax = 255;
constexpr size_t kSymlinkMax = 4095;
constexpr size_t kXattrNameMax = 255;
constexpr size_t kXattrValueMax = 64 * 1024;
constexpr uint32_t kRenameNoReplace = 1;
constexpr uint32_t kRenameExchange = 2;
constexpr uint32_t kRenameWhiteout = 4;
constexpr char kDefaultAclXattr[] = "system.posix_acl_default";
constexpr uint32_t kXattrCreate = 1;
constexpr uint32_t kXattrReplace = 2;

Timespec Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return Timespec{ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}

bool IsDir(uint32_t mode) { return S_ISDIR(mode); }
bool IsReg(uint32_t mode) { return S_ISREG(mode); }

std::string InoStr(uint64_t ino) { return "inode " + std::to_string(ino); }

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

// Checks a directory entry name. "." and ".." pass; callers decide.
Status ValidateName(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("empty file name");
  if (name.size() > kNameMax) {
    return Status(ENAMETOOLONG, "file name of " + std::to_string(name.size()) +
                                    " bytes is longer than 255");
  }
  if (name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Status::InvalidArgument("file name contains '/' or a NUL byte");
  }
  return Status::Ok();
}

bool IsDots(const std::string& name) { return name == "." || name == ".."; }

Status ValidateXattrName(const std::string& name) {
  if (name.empty() || name.size() > kXattrNameMax) {
    return Status(ERANGE, "xattr name must be 1..255 bytes, got " +
                              std::to_string(name.size()));
  }
  return Status::Ok();
}

}  // namespace

// One atomic change: inode records are loaded once, modified in memory and
// written together with every other change in a single transaction. The
// volume statistics (this MetaStore's record of them) are read into the
// transaction only when the change needs them; inode numbers come from the
// MetaStore's leased block. Must be used with mu_ held.
class MetaStore::Mutation {
 public:
  explicit Mutation(MetaStore* s)
      : store_(s), txn_(s->kv_->Begin()), now_(Now()) {}
  // A mutation that did not commit gives its inode numbers back, so a
  // re-run after a conflict takes the same ones (no gap per conflict).
  ~Mutation() {
    if (committed_) return;
    for (auto it = taken_.rbegin(); it != taken_.rend(); ++it) {
      if (*it + 1 == store_->next_inode_) store_->next_inode_--;
    }
  }
  Mutation(const Mutation&) = delete;
  Mutation& operator=(const Mutation&) = delete;

  const Timespec& now() const { return now_; }
  KvTxn& txn() { return *txn_; }
  FsStats& stats() {
    if (stats_loaded_) return stats_;
    stats_loaded_ = true;
    // A shard starts absent (all zero); the base always exists.
    const std::string& key = store_->stats_key_;
    auto v = txn_->Get(key);
    Status st = v.status();
    if (st.ok() && *v) {
      auto decoded = DecodeStats(**v);
      st = decoded.status();
      if (st.ok()) stats_ = loaded_stats_ = *decoded;
    } else if (st.ok() && key == MetaKey(kMetaStats)) {
      st = Status::Corruption("stats record is missing");
    }
    if (!st.ok() && counter_error_.ok()) counter_error_ = st;
    return stats_;
  }

  Result<InodeRecord*> Inode(uint64_t ino) {
    if (deleted_.count(ino))
      return Status::NotFound(InoStr(ino) + " was removed");
    auto it = inodes_.find(ino);
    if (it != inodes_.end()) return &it->second;
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              txn_->Get(InodeKey(ino)));
    if (!v) return Status::NotFound(InoStr(ino) + " does not exist");
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord rec, DecodeInode(*v));
    return &inodes_.emplace(ino, std::move(rec)).first->second;
  }
  // Like Inode() and marks it to be written back.
  Result<InodeRecord*> Modify(uint64_t ino) {
    auto r = Inode(ino);
    if (r.ok()) dirty_.insert(ino);
    return r;
  }
  Result<InodeRecord*> ModifyDir(uint64_t ino) {
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, Modify(ino));
    if (!IsDir(rec->attr.mode)) {
      return Status(ENOTDIR, InoStr(ino) + " is not a directory");
    }
    return rec;
  }
  Result<InodeRecord*> NewInode() {
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t ino, store_->TakeInode());
    taken_.push_back(ino);
    InodeRecord& rec = inodes_[ino];
    rec.attr.ino = ino;
    rec.attr.generation = 1;
    rec.attr.atime = rec.attr.mtime = rec.attr.ctime = now_;
    dirty_.insert(ino);
    stats().inodes++;
    return &rec;
  }
  // Deletes the inode record and its symlink target, xattrs and orphan mark
  // (not its stripes: see DropStripesFrom).
  Status DeleteInode(uint64_t ino) {
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, Inode(ino));
    if (IsReg(rec->attr.mode)) stats().bytes_used -= rec->attr.size;
    stats().inodes--;
    deleted_.insert(ino);
    dirty_.erase(ino);
    txn_->Delete(InodeKey(ino));
    txn_->Delete(SymlinkKey(ino));
    txn_->Delete(OrphanKey(ino));
    std::string prefix = XattrPrefix(ino);
    txn_->DeleteRange(prefix, PrefixEnd(prefix));
    return Status::Ok();
  }

  // A removed (empty) directory stays as an orphan with nlink 0 until
  // PurgeInode, so that handles still open on it keep working.
  Status OrphanDirectory(uint64_t ino) {
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, Modify(ino));
    rec->attr.nlink = 0;
    rec->attr.ctime = now_;
    txn_->Put(OrphanKey(ino), "");
    return Status::Ok();
  }

  Result<std::optional<DentryValue>> GetDentry(uint64_t parent,
                                               const std::string& name) {
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              txn_->Get(DentryKey(parent, name)));
    if (!v) return std::optional<DentryValue>();
    STRIPEFS_ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(*v));
    return std::optional<DentryValue>(d);
  }
  void PutDentry(uint64_t parent, const std::string& name,
                 const DentryValue& d) {
    txn_->Put(DentryKey(parent, name), EncodeDentry(d));
    txn_->Put(CookieKey(parent, d.seq), name);
  }
  void DeleteDentry(uint64_t parent, const std::string& name, uint64_t seq) {
    txn_->Delete(DentryKey(parent, name));
    txn_->Delete(CookieKey(parent, seq));
  }
  Result<bool> DirIsEmpty(uint64_t dir) {
    std::string prefix = DentryPrefix(dir);
    STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> first,
                              txn_->Scan(prefix, PrefixEnd(prefix), 1));
    return first.empty();
  }

  Status Commit() {
    STRIPEFS_RETURN_IF_ERROR(counter_error_);
    for (uint64_t ino : dirty_) {
      txn_->Put(InodeKey(ino), EncodeInode(inodes_.at(ino)));
    }
    if (stats_loaded_ && (stats_.inodes != loaded_stats_.inodes ||
                          stats_.bytes_used != loaded_stats_.bytes_used)) {
      txn_->Put(store_->stats_key_, EncodeStats(stats_));
    }
    Status st = txn_->Commit().status();
    committed_ = st.ok();
    return st;
  }

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

// --- lifecycle -----------------------------------------------------------

MetaStore::MetaStore(std::string dir, MetaStoreOptions options,
                     std::unique_ptr<KvStore> kv)
    : dir_(std::move(dir)), options_(options), kv_(std::move(kv)) {
  if (options_.sync && options_.namespace_sync_delay.count() > 0) {
    syncer_ = std::thread([this] { SyncLoop(); });
  }
}

MetaStore::~MetaStore() {
  if (syncer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(syncer_mu_);
      stopping_ = true;
    }
    syncer_cv_.notify_all();
    syncer_.join();
    (void)Sync();  // a clean stop leaves nothing unsynced
  }
}

void MetaStore::SyncLoop() {
  std::unique_lock<std::mutex> lock(syncer_mu_);
  while (!syncer_cv_.wait_for(lock, options_.namespace_sync_delay,
                              [&] { return stopping_; })) {
    lock.unlock();
    // Cheap when nothing new was written (WaitDurable returns at once). A
    // failed sync is retried next round and reported by the next Sync().
    (void)kv_->WaitDurable(kv_->last_ticket());
    lock.lock();
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

void MetaStore::BackOff(int attempt) {
  // Up to ~10 ms, so metads that collide retry at different times.
  std::this_thread::sleep_for(
      std::chrono::microseconds(100 * std::min(attempt, 100)));
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
  b->Put(MetaKey(kMetaCluster), EncodeClusterMap(ClusterMap{}));
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
  STRIPEFS_ASSIGN_OR_RETURN(version_limit_, DecodeU64(v));
  // Versions below the durable limit may have been handed out before a
  // restart: never hand them out again.
  next_version_ = version_limit_;
  STRIPEFS_RETURN_IF_ERROR(LoadVolumeUuid());
  // No inode block leased yet: the first create leases one.
  next_inode_ = inode_limit_ = 0;
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
    if (ticket.status().code() == kKvConflict && attempt < kMaxAttempts) {
      BackOff(attempt);
      continue;  // another opener wrote it: read theirs
    }
    STRIPEFS_RETURN_IF_ERROR(ticket.status());
    STRIPEFS_RETURN_IF_ERROR(kv_->WaitDurable(*ticket));
  }
}

Result<uint64_t> MetaStore::TakeInode() {
  if (next_inode_ < inode_limit_) return next_inode_++;
  const uint64_t batch = std::max<uint32_t>(options_.inode_batch, 1);
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<KvTxn> txn = kv_->Begin();
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              txn->Get(MetaKey(kMetaNextInode)));
    if (!v) return Status::Corruption("inode counter is missing");
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t start, DecodeU64(*v));
    if (start > std::numeric_limits<uint64_t>::max() - batch) {
      return Status(EOVERFLOW, "inode numbers exhausted");
    }
    txn->Put(MetaKey(kMetaNextInode), EncodeU64(start + batch));
    auto ticket = txn->Commit();
    if (ticket.status().code() == kKvConflict && attempt < kMaxAttempts) {
      lease_conflicts_.fetch_add(1, std::memory_order_relaxed);
      BackOff(attempt);
      continue;
    }
    STRIPEFS_RETURN_IF_ERROR(ticket.status());
    next_inode_ = start;
    inode_limit_ = start + batch;
    return next_inode_++;
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

// --- volume and cluster --------------------------------------------------

Result<Geometry> MetaStore::GetGeometry() { return geometry_; }

Result<ClusterMap> MetaStore::GetClusterMap() {
  STRIPEFS_ASSIGN_OR_RETURN(std::string v,
                            Get(MetaKey(kMetaCluster), "cluster map"));
  return DecodeClusterMap(v);
}

namespace {

Result<ClusterMap> ReadClusterMap(KvReader& r) {
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                            r.Get(MetaKey(kMetaCluster)));
  if (!v) return Status::NotFound("cluster map does not exist");
  return DecodeClusterMap(*v);
}

}  // namespace

Status MetaStore::UpsertServer(const ServerInfo& info) {
  if (info.address.size() > 4096 || info.failure_domain.size() > 4096) {
    return Status::InvalidArgument(
        "server address or failure domain longer "
        "than 4096 bytes");
  }
  if (info.state > ServerState::kOut) {
    return Status::InvalidArgument("unknown server state");
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(ClusterMap map, ReadClusterMap(m.txn()));
    auto it =
        std::find_if(map.servers.begin(), map.servers.end(),
                     [&](const ServerInfo& s) { return s.id >= info.id; });
    if (it != map.servers.end() && it->id == info.id) {
      *it = info;
    } else {
      map.servers.insert(it, info);
    }
    map.epoch++;
    m.txn().Put(MetaKey(kMetaCluster), EncodeClusterMap(map));
    return m.Commit();
  });
}

Status MetaStore::SetServerState(uint32_t id, ServerState state) {
  if (state > ServerState::kOut) {
    return Status::InvalidArgument("unknown server state");
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(ClusterMap map, ReadClusterMap(m.txn()));
    auto it = std::find_if(map.servers.begin(), map.servers.end(),
                           [&](const ServerInfo& s) { return s.id == id; });
    if (it == map.servers.end()) {
      return Status::NotFound("server " + std::to_string(id) +
                              " is not in the cluster map (add it first)");
    }
    if (it->state == state) return Status::Ok();
    it->state = state;
    map.epoch++;
    m.txn().Put(MetaKey(kMetaCluster), EncodeClusterMap(map));
    return m.Commit();
  });
}

Result<bool> MetaStore::SetServerStateIf(const ServerInfo& seen,
                                         ServerState state) {
  if (state > ServerState::kOut) {
    return Status::InvalidArgument("unknown server state");
  }
  return Mutate([&]() -> Result<bool> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(ClusterMap map, ReadClusterMap(m.txn()));
    auto it =
        std::find_if(map.servers.begin(), map.servers.end(),
                     [&](const ServerInfo& s) { return s.id == seen.id; });
    if (it == map.servers.end() || !(*it == seen) || it->state == state) {
      return false;
    }
    it->state = state;
    map.epoch++;
    m.txn().Put(MetaKey(kMetaCluster), EncodeClusterMap(map));
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return true;
  });
}

Result<bool> MetaStore::HoldLeadership(const std::string& holder,
                                       std::chrono::milliseconds ttl) {
  if (holder.empty() || holder.size() > 4096 || ttl.count() <= 0) {
    return Status::InvalidArgument(
        "leader lease needs a holder name (1..4096 bytes) and a positive ttl");
  }
  return Mutate([&]() -> Result<bool> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              m.txn().Get(MetaKey(kMetaLeader)));
    const uint64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count();
    if (v) {
      STRIPEFS_ASSIGN_OR_RETURN(LeaderLease cur, DecodeLeaderLease(*v));
      if (cur.holder != holder && cur.expires_ms > now) return false;
    }
    m.txn().Put(MetaKey(kMetaLeader),
                EncodeLeaderLease({holder, now + ttl.count()}));
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return true;
  });
}

// --- namespace reads -----------------------------------------------------

namespace {

// Reads through one snapshot, so multi-record reads are consistent.
class SnapshotReader {
 public:
  explicit SnapshotReader(KvStore* kv) : r_(kv->Snapshot()) {}

  // ENOENT (with `what`) if missing.
  Result<std::string> Get(const std::string& key, const std::string& what) {
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v, r_->Get(key));
    if (!v) return Status::NotFound(what + " does not exist");
    return std::move(*v);
  }
  Result<InodeRecord> Inode(uint64_t ino) {
    STRIPEFS_ASSIGN_OR_RETURN(std::string v, Get(InodeKey(ino), InoStr(ino)));
    return DecodeInode(v);
  }
  Result<InodeRecord> Dir(uint64_t ino) {
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord rec, Inode(ino));
    if (!IsDir(rec.attr.mode)) {
      return Status(ENOTDIR, InoStr(ino) + " is not a directory");
    }
    return rec;
  }
  // The pairs in [start, end) in the snapshot, at most `limit` (0 = all).
  Result<std::vector<KvPair>> Range(const std::string& start,
                                    const std::string& end, size_t limit = 0) {
    return r_->Scan(start, end, limit);
  }

 private:
  std::unique_ptr<KvReader> r_;
};

}  // namespace

Result<InodeAttr> MetaStore::Lookup(uint64_t parent, const std::string& name) {
  if (name.empty()) return Status::NotFound("empty file name");
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  if (name == "." || name == "..") {
    SnapshotReader r(kv_.get());
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord dir, r.Dir(parent));
    if (name == ".") return dir.attr;
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord up, r.Inode(dir.parent));
    return up.attr;
  }
  // The hot path: two point reads, no snapshot (taking one costs a DB
  // mutex). An entry removed between the reads is reported as ENOENT, as if
  // the lookup had come after the removal.
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> dv,
                            kv_->Get(DentryKey(parent, name)));
  if (dv) {
    STRIPEFS_ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(*dv));
    return GetAttr(d.ino);
  }
  // No entry: say why (missing parent, parent not a directory, no name).
  STRIPEFS_ASSIGN_OR_RETURN(std::string v,
                            Get(InodeKey(parent), InoStr(parent)));
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord dir, DecodeInode(v));
  if (!IsDir(dir.attr.mode)) {
    return Status(ENOTDIR, InoStr(parent) + " is not a directory");
  }
  return Status::NotFound("'" + name + "' does not exist in " + InoStr(parent));
}

Result<InodeAttr> MetaStore::GetAttr(uint64_t ino) {
  STRIPEFS_ASSIGN_OR_RETURN(std::string v, Get(InodeKey(ino), InoStr(ino)));
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord rec, DecodeInode(v));
  return rec.attr;
}

Result<std::string> MetaStore::ReadLink(uint64_t ino) {
  SnapshotReader r(kv_.get());
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord rec, r.Inode(ino));
  if (!S_ISLNK(rec.attr.mode)) {
    return Status::InvalidArgument(InoStr(ino) + " is not a symbolic link");
  }
  return r.Get(SymlinkKey(ino), "symlink target of " + InoStr(ino));
}

Result<std::vector<DirEntry>> MetaStore::ReadDir(uint64_t ino, uint64_t cookie,
                                                 uint32_t max_entries) {
  SnapshotReader r(kv_.get());
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord dir, r.Dir(ino));
  std::vector<DirEntry> out;
  if (cookie < kCookieDot && out.size() < max_entries) {
    out.push_back(DirEntry{".", ino, S_IFDIR, kCookieDot});
  }
  if (cookie < kCookieDotDot && out.size() < max_entries) {
    out.push_back(DirEntry{"..", dir.parent, S_IFDIR, kCookieDotDot});
  }
  if (out.size() >= max_entries ||
      cookie == std::numeric_limits<uint64_t>::max()) {
    return out;
  }
  std::string prefix = CookiePrefix(ino);
  STRIPEFS_ASSIGN_OR_RETURN(
      std::vector<KvPair> cookies,
      r.Range(CookieKey(ino, std::max(cookie + 1, kFirstEntrySeq)),
              PrefixEnd(prefix), max_entries - out.size()));
  for (KvPair& p : cookies) {
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t seq, ParseCookieSeq(p.key));
    std::string name = std::move(p.value);
    STRIPEFS_ASSIGN_OR_RETURN(
        std::string v, r.Get(DentryKey(ino, name), "entry '" + name + "'"));
    STRIPEFS_ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(v));
    out.push_back(DirEntry{std::move(name), d.ino, d.type, seq});
  }
  return out;
}

// --- namespace mutations -------------------------------------------------

Result<EntryChange> MetaStore::CreateNode(
    uint64_t parent, const std::string& name, uint32_t mode, uint32_t uid,
    uint32_t gid, uint32_t rdev, const std::string* symlink, uint32_t flags) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  return MutateNamespace([&]() -> Result<EntryChange> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(parent));
    if (IsDots(name)) return Status::Exists("'" + name + "' always exists");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> existing,
                              m.GetDentry(parent, name));
    if (existing) {
      return Status::Exists("'" + name + "' already exists in " +
                            InoStr(parent));
    }
    if (flags & kCreateUnlessDefaultAcl) {
      // Read in the transaction: a default ACL set concurrently either
      // conflicts with this create or is seen here.
      STRIPEFS_ASSIGN_OR_RETURN(
          std::optional<std::string> acl,
          m.txn().Get(XattrKey(parent, kDefaultAclXattr)));
      if (acl) {
        return Status(kCreateNeedsAcl, InoStr(parent) +
                                           " has a default ACL: the caller "
                                           "decides the new inode's ACLs");
      }
    }
    uint32_t new_mode = mode;
    uint32_t new_gid = gid;
    if ((flags & kCreateInheritSetgid) && (dir->attr.mode & S_ISGID)) {
      new_gid = dir->attr.gid;
      if (IsDir(mode)) new_mode |= S_ISGID;
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.NewInode());
    rec->attr.mode = new_mode;
    rec->attr.uid = uid;
    rec->attr.gid = new_gid;
    rec->attr.rdev = rdev;
    if (IsDir(mode)) {
      rec->attr.nlink = 2;
      rec->parent = parent;
      rec->next_seq = kFirstEntrySeq;
      dir->attr.nlink++;
    } else {
      rec->attr.nlink = 1;
    }
    if (symlink) {
      rec->attr.size = symlink->size();
      m.txn().Put(SymlinkKey(rec->attr.ino), *symlink);
    }
    m.PutDentry(parent, name,
                DentryValue{rec->attr.ino, mode & S_IFMT, dir->next_seq++});
    dir->attr.mtime = dir->attr.ctime = m.now();
    EntryChange out{rec->attr, dir->attr};
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return out;
  });
}

Result<InodeAttr> MetaStore::CreateAnonymous(uint64_t parent, uint32_t mode,
                                             uint32_t uid, uint32_t gid) {
  return MutateNamespace([&]() -> Result<InodeAttr> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.Inode(parent));
    if (!IsDir(dir->attr.mode)) {
      return Status(ENOTDIR, InoStr(parent) + " is not a directory");
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.NewInode());
    rec->attr.mode = S_IFREG | (mode & 07777);
    rec->attr.uid = uid;
    rec->attr.gid = gid;
    rec->attr.nlink = 0;
    m.txn().Put(OrphanKey(rec->attr.ino), std::string(kOrphanLinkable));
    InodeAttr attr = rec->attr;
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return attr;
  });
}

Result<InodeAttr> MetaStore::MkNode(uint64_t parent, const std::string& name,
                                    uint32_t mode, uint32_t uid, uint32_t gid,
                                    uint32_t rdev) {
  uint32_t type = mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  if (name.empty() && type == S_IFREG)
    return CreateAnonymous(parent, mode, uid, gid);
  if (type != S_IFREG && type != S_IFCHR && type != S_IFBLK &&
      type != S_IFIFO && type != S_IFSOCK) {
    return Status::InvalidArgument(
        "MkNode makes regular files, devices, fifos and sockets; use Mkdir "
        "or Symlink for other types");
  }
  auto r = CreateNode(parent, name, type | (mode & 07777), uid, gid,
                      (type == S_IFCHR || type == S_IFBLK) ? rdev : 0, nullptr);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<InodeAttr> MetaStore::Mkdir(uint64_t parent, const std::string& name,
                                   uint32_t mode, uint32_t uid, uint32_t gid) {
  auto r =
      CreateNode(parent, name, S_IFDIR | (mode & 07777), uid, gid, 0, nullptr);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<EntryChange> MetaStore::CreateEntry(const CreateEntryRequest& req) {
  if (req.name.empty())
    return Status::InvalidArgument("CreateEntry needs a name");
  if ((req.flags & ~kCreateEntryFlagsAll) != 0) {
    return Status::InvalidArgument("unknown CreateEntry flags " +
                                   std::to_string(req.flags));
  }
  uint32_t type = req.mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  if (type != S_IFREG && type != S_IFCHR && type != S_IFBLK &&
      type != S_IFIFO && type != S_IFSOCK && type != S_IFDIR) {
    return Status::InvalidArgument(
        "CreateEntry makes regular files, devices, fifos, sockets and "
        "directories");
  }
  return CreateNode(
      req.parent, req.name, type | (req.mode & 07777), req.uid, req.gid,
      (type == S_IFCHR || type == S_IFBLK) ? req.rdev : 0, nullptr, req.flags);
}

Result<InodeAttr> MetaStore::Symlink(uint64_t parent, const std::string& name,
                                     const std::string& target, uint32_t uid,
                                     uint32_t gid) {
  if (target.empty()) return Status::NotFound("empty symlink target");
  if (target.size() > kSymlinkMax) {
    return Status(ENAMETOOLONG, "symlink target longer than 4095 bytes");
  }
  if (target.find('\0') != std::string::npos) {
    return Status::InvalidArgument("symlink target contains a NUL byte");
  }
  auto r = CreateNode(parent, name, S_IFLNK | 0777, uid, gid, 0, &target);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<InodeAttr> MetaStore::Link(uint64_t ino, uint64_t new_parent,
                                  const std::string& new_name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(new_name));
  return MutateNamespace([&]() -> Result<InodeAttr> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    if (IsDir(rec->attr.mode)) {
      return Status(EPERM, "cannot hard-link directory " + InoStr(ino));
    }
    const bool relink = rec->attr.nlink == 0;
    if (relink) {
      // Read in the transaction: a concurrent link or purge of the same
      // orphan then conflicts instead of both seeing the mark.
      STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> orphan,
                                m.txn().Get(OrphanKey(ino)));
      if (!orphan || *orphan != kOrphanLinkable) {
        return Status::NotFound(InoStr(ino) + " was unlinked");
      }
    }
    if (rec->attr.nlink == std::numeric_limits<uint32_t>::max()) {
      return Status(EMLINK, InoStr(ino) + " has too many links");
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(new_parent));
    if (IsDots(new_name))
      return Status::Exists("'" + new_name + "' always exists");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> existing,
                              m.GetDentry(new_parent, new_name));
    if (existing) {
      return Status::Exists("'" + new_name + "' already exists in " +
                            InoStr(new_parent));
    }
    m.PutDentry(new_parent, new_name,
                DentryValue{ino, rec->attr.mode & S_IFMT, dir->next_seq++});
    rec->attr.nlink++;
    if (relink) m.txn().Delete(OrphanKey(ino));  // O_TMPFILE gets a name
    rec->attr.ctime = m.now();
    dir->attr.mtime = dir->attr.ctime = m.now();
    InodeAttr attr = rec->attr;
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return attr;
  });
}

Result<InodeAttr> MetaStore::Unlink(uint64_t parent, const std::string& name) {
  auto r = UnlinkEntry(parent, name);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<EntryChange> MetaStore::UnlinkEntry(uint64_t parent,
                                           const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  return MutateNamespace([&]() -> Result<EntryChange> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(parent));
    if (IsDots(name)) return Status(EISDIR, "'" + name + "' is a directory");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> d,
                              m.GetDentry(parent, name));
    if (!d) {
      return Status::NotFound("'" + name + "' does not exist in " +
                              InoStr(parent));
    }
    if (IsDir(d->type)) {
      return Status(EISDIR, "'" + name + "' is a directory (use rmdir)");
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(d->ino));
    m.DeleteDentry(parent, name, d->seq);
    if (rec->attr.nlink > 0) rec->attr.nlink--;
    rec->attr.ctime = m.now();
    if (rec->attr.nlink == 0) m.txn().Put(OrphanKey(d->ino), "");
    dir->attr.mtime = dir->attr.ctime = m.now();
    EntryChange out{rec->attr, dir->attr};
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return out;
  });
}

Status MetaStore::Rmdir(uint64_t parent, const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  return MutateNamespace([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(parent));
    if (name == ".") return Status::InvalidArgument("cannot rmdir '.'");
    if (name == "..") return Status(ENOTEMPTY, "cannot rmdir '..'");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> d,
                              m.GetDentry(parent, name));
    if (!d) {
      return Status::NotFound("'" + name + "' does not exist in " +
                              InoStr(parent));
    }
    if (!IsDir(d->type)) {
      return Status(ENOTDIR, "'" + name + "' is not a directory");
    }
    STRIPEFS_ASSIGN_OR_RETURN(bool empty, m.DirIsEmpty(d->ino));
    if (!empty) {
      return Status(ENOTEMPTY, "directory '" + name + "' is not empty");
    }
    m.DeleteDentry(parent, name, d->seq);
    STRIPEFS_RETURN_IF_ERROR(m.OrphanDirectory(d->ino));
    dir->attr.nlink--;
    dir->attr.mtime = dir->attr.ctime = m.now();
    return m.Commit();
  });
}

Result<bool> MetaStore::IsAncestor(Mutation& m, uint64_t ancestor,
                                   uint64_t ino) {
  // Bounded walk up the '..' chain: a longer chain means a cycle.
  for (int depth = 0; depth < (1 << 20); ++depth) {
    if (ino == ancestor) return true;
    if (ino == kRootInode) return false;
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Inode(ino));
    ino = rec->parent;
  }
  return Status::Corruption(
      "directory parent chain loops; the metadata "
      "store is damaged");
}

// RENAME_WHITEOUT: the source name becomes an overlayfs whiteout, a
// character device 0/0 with mode 0, owned like the inode that moved.
Status MetaStore::PutWhiteout(Mutation& m, uint64_t parent,
                              const std::string& name, const InodeRecord& moved,
                              InodeRecord* pdir) {
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * w, m.NewInode());
  w->attr.mode = S_IFCHR;
  w->attr.uid = moved.attr.uid;
  w->attr.gid = moved.attr.gid;
  w->attr.nlink = 1;
  m.PutDentry(parent, name,
              DentryValue{w->attr.ino, S_IFCHR, pdir->next_seq++});
  return Status::Ok();
}

Status MetaStore::Rename(uint64_t parent, const std::string& name,
                         uint64_t new_parent, const std::string& new_name,
                         uint32_t flags, uint64_t* replaced) {
  if (replaced) *replaced = 0;
  if ((flags & ~(kRenameNoReplace | kRenameExchange | kRenameWhiteout)) != 0 ||
      ((flags & kRenameExchange) && flags != kRenameExchange)) {
    return Status::InvalidArgument("unsupported rename flags " +
                                   std::to_string(flags));
  }
  const bool exchange = flags & kRenameExchange;
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  STRIPEFS_RETURN_IF_ERROR(ValidateName(new_name));
  return MutateNamespace([&]() -> Status {
    if (replaced) *replaced = 0;
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * pdir, m.ModifyDir(parent));
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * npdir, m.ModifyDir(new_parent));
    if (IsDots(name) || IsDots(new_name)) {
      return Status(EBUSY, "cannot rename '.' or '..'");
    }
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> src,
                              m.GetDentry(parent, name));
    if (!src) {
      return Status::NotFound("'" + name + "' does not exist in " +
                              InoStr(parent));
    }
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> dst,
                              m.GetDentry(new_parent, new_name));
    if (exchange && !dst) {
      return Status::NotFound("'" + new_name + "' does not exist in " +
                              InoStr(new_parent) + " (RENAME_EXCHANGE)");
    }
    if ((flags & kRenameNoReplace) && dst) {
      return Status::Exists("'" + new_name + "' already exists in " +
                            InoStr(new_parent) + " (RENAME_NOREPLACE)");
    }
    // Both names already refer to the same inode: POSIX says do nothing.
    if (dst && dst->ino == src->ino) return Status::Ok();

    const bool src_dir = IsDir(src->type);
    const bool dst_dir = dst && IsDir(dst->type);
    if (parent != new_parent) {
      if (src_dir) {
        STRIPEFS_ASSIGN_OR_RETURN(bool loop,
                                  IsAncestor(m, src->ino, new_parent));
        if (loop) {
          return Status::InvalidArgument("cannot move directory '" + name +
                                         "' into its own subtree");
        }
      }
      if (exchange && dst_dir) {
        STRIPEFS_ASSIGN_OR_RETURN(bool loop, IsAncestor(m, dst->ino, parent));
        if (loop) {
          return Status::InvalidArgument("cannot move directory '" + new_name +
                                         "' into its own subtree");
        }
      }
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * srec, m.Modify(src->ino));
    const Timespec now = m.now();

    if (exchange) {
      STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * drec, m.Modify(dst->ino));
      // Each name keeps its cookie; only the targets swap.
      m.PutDentry(parent, name, DentryValue{dst->ino, dst->type, src->seq});
      m.PutDentry(new_parent, new_name,
                  DentryValue{src->ino, src->type, dst->seq});
      if (parent != new_parent) {
        if (src_dir) {
          srec->parent = new_parent;
          pdir->attr.nlink--;
          npdir->attr.nlink++;
        }
        if (dst_dir) {
          drec->parent = parent;
          npdir->attr.nlink--;
          pdir->attr.nlink++;
        }
      }
      drec->attr.ctime = now;
    } else {
      uint64_t seq;
      if (dst) {
        if (src_dir && !dst_dir) {
          return Status(ENOTDIR, "cannot replace non-directory '" + new_name +
                                     "' with directory '" + name + "'");
        }
        if (!src_dir && dst_dir) {
          return Status(EISDIR, "cannot replace directory '" + new_name +
                                    "' with non-directory '" + name + "'");
        }
        if (dst_dir) {
          STRIPEFS_ASSIGN_OR_RETURN(bool empty, m.DirIsEmpty(dst->ino));
          if (!empty) {
            return Status(ENOTEMPTY,
                          "directory '" + new_name + "' is not empty");
          }
          STRIPEFS_RETURN_IF_ERROR(m.OrphanDirectory(dst->ino));
          npdir->attr.nlink--;
        } else {
          STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * drec, m.Modify(dst->ino));
          if (drec->attr.nlink > 0) drec->attr.nlink--;
          drec->attr.ctime = now;
          if (drec->attr.nlink == 0) m.txn().Put(OrphanKey(dst->ino), "");
        }
        if (replaced) *replaced = dst->ino;
        seq = dst->seq;  // the moved entry takes over the replaced one's slot
      } else {
        seq = npdir->next_seq++;
      }
      m.DeleteDentry(parent, name, src->seq);
      m.PutDentry(new_parent, new_name, DentryValue{src->ino, src->type, seq});
      if (flags & kRenameWhiteout) {
        STRIPEFS_RETURN_IF_ERROR(PutWhiteout(m, parent, name, *srec, pdir));
      }
      if (src_dir && parent != new_parent) {
        srec->parent = new_parent;
        pdir->attr.nlink--;
        npdir->attr.nlink++;
      }
    }
    srec->attr.ctime = now;
    pdir->attr.mtime = pdir->attr.ctime = now;
    npdir->attr.mtime = npdir->attr.ctime = now;
    return m.Commit();
  });
}

Result<InodeAttr> MetaStore::SetAttr(uint64_t ino, const SetAttrRequest& req,
                                     std::vector<ObsoleteStripe>* obsolete) {
  std::vector<ObsoleteStripe> dropped;
  // A size change drops stripes whose chunks are deleted next: durable.
  const bool resizes = (req.mask & kSetSize) != 0;
  auto result = MutateNamespace(resizes, [&]() -> Result<InodeAttr> {
    dropped.clear();
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    InodeAttr& a = rec->attr;
    if (req.mask == 0) return a;
    const Timespec now = m.now();
    if (req.mask & kSetSize) {
      if (IsDir(a.mode)) return Status(EISDIR, InoStr(ino) + " is a directory");
      if (!IsReg(a.mode)) {
        return Status::InvalidArgument("cannot set the size of " + InoStr(ino) +
                                       ": not a regular file");
      }
      const uint64_t new_size =
          (req.mask & kSetSizeAtLeast) ? std::max(a.size, req.size) : req.size;
      if (new_size < a.size) {
        const uint64_t s = geometry_.stripe_size();
        const uint64_t first_dropped = new_size / s + (new_size % s ? 1 : 0);
        STRIPEFS_RETURN_IF_ERROR(
            DropStripesFrom(m, ino, first_dropped, &dropped));
      }
      m.stats().bytes_used = m.stats().bytes_used - a.size + new_size;
      if (new_size != a.size && !(req.mask & kKeepTimes)) a.mtime = now;
      a.size = new_size;
    }
    if (req.mask & kSetMode) a.mode = (a.mode & S_IFMT) | (req.mode & 07777);
    if (req.mask & kSetUid) a.uid = req.uid;
    if (req.mask & kSetGid) a.gid = req.gid;
    if (req.mask & kSetAtime) a.atime = req.atime;
    if (req.mask & kSetAtimeNow) a.atime = now;
    if (req.mask & kSetMtime) a.mtime = req.mtime;
    if (req.mask & kSetMtimeNow) a.mtime = now;
    if (req.mask & kSetCtime) {
      a.ctime = req.ctime;
    } else if (!(req.mask & kKeepTimes)) {
      a.ctime = now;
    }
    InodeAttr attr = a;
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return attr;
  });
  if (result.ok() && obsolete) {
    obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
  }
  return result;
}

Status MetaStore::DropStripesFrom(Mutation& m, uint64_t ino,
                                  uint64_t first_dropped,
                                  std::vector<ObsoleteStripe>* obsolete,
                                  uint64_t end_stripe) {
  const std::string start = StripeKey(ino, first_dropped);
  const std::string end = end_stripe == std::numeric_limits<uint64_t>::max()
                              ? PrefixEnd(StripePrefix(ino))
                              : StripeKey(ino, end_stripe);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> stripes,
                            m.txn().Scan(start, end, 0));
  for (const KvPair& p : stripes) {
    STRIPEFS_ASSIGN_OR_RETURN(StripeRef ref, ParseStripe(p.key, p.value));
    if (obsolete) obsolete->push_back({ino, ref.sv.stripe, ref.sv.version});
  }
  // One operation however many stripes the file has.
  if (!stripes.empty()) m.txn().DeleteRange(start, end);
  return Status::Ok();
}

Status MetaStore::DropStripes(uint64_t ino, uint64_t first, uint64_t count,
                              std::vector<ObsoleteStripe>* obsolete) {
  return DropStripesImpl(ino, first, count, /*stamp=*/true, obsolete);
}

Status MetaStore::DropStripesKeepTimes(uint64_t ino, uint64_t first,
                                       uint64_t count,
                                       std::vector<ObsoleteStripe>* obsolete) {
  return DropStripesImpl(ino, first, count, /*stamp=*/false, obsolete);
}

Status MetaStore::DropStripesImpl(uint64_t ino, uint64_t first, uint64_t count,
                                  bool stamp,
                                  std::vector<ObsoleteStripe>* obsolete) {
  if (count == 0 || first > std::numeric_limits<uint64_t>::max() - count) {
    return Status::InvalidArgument("stripe range out of bounds");
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    if (!IsReg(rec->attr.mode)) {
      return Status::InvalidArgument(InoStr(ino) + " is not a regular file");
    }
    std::vector<ObsoleteStripe> dropped;
    STRIPEFS_RETURN_IF_ERROR(
        DropStripesFrom(m, ino, first, &dropped, first + count));
    if (stamp) rec->attr.mtime = rec->attr.ctime = m.now();
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    if (obsolete)
      obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
    return Status::Ok();
  });
}

Status MetaStore::PurgeInode(uint64_t ino,
                             std::vector<ObsoleteStripe>* obsolete) {
  std::vector<ObsoleteStripe> dropped;
  return MutateNamespace([&]() -> Status {
    dropped.clear();
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Inode(ino));
    if (rec->attr.nlink != 0) {
      return Status(EBUSY, InoStr(ino) + " still has " +
                               std::to_string(rec->attr.nlink) + " link(s)");
    }
    STRIPEFS_RETURN_IF_ERROR(DropStripesFrom(m, ino, 0, &dropped));
    STRIPEFS_RETURN_IF_ERROR(m.DeleteInode(ino));
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    if (obsolete)
      obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
    return Status::Ok();
  });
}

Status MetaStore::PurgeOne(Mutation& m, uint64_t ino,
                           std::vector<ObsoleteStripe>* dropped) {
  const size_t before = dropped->size();
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Inode(ino));
  if (rec->attr.nlink != 0) {
    return Status(EBUSY, InoStr(ino) + " still has " +
                             std::to_string(rec->attr.nlink) + " link(s)");
  }
  // DropStripesFrom writes only after its reads succeeded.
  Status st = DropStripesFrom(m, ino, 0, dropped);
  if (!st.ok()) {
    dropped->resize(before);
    return st;
  }
  return m.DeleteInode(ino);  // cannot fail: the record is loaded
}

namespace {
// Transaction writes per purged inode: the inode, symlink and orphan keys,
// the xattr range and the stripe range (see PurgeOne). The estimate is
// doubled for the reads an engine may also bound (etcd compares).
constexpr size_t kPurgeOpsPerInode = 5;
}  // namespace

Status MetaStore::PurgeInodes(const std::vector<uint64_t>& inos,
                              std::vector<int32_t>* codes,
                              std::vector<ObsoleteStripe>* obsolete) {
  codes->clear();
  if (inos.size() > kMaxInodesPerPurge) return TooManyToPurge(inos.size());
  const size_t max_ops = kv_->limits().max_ops;
  const size_t group =
      max_ops == 0
          ? std::max<size_t>(1, inos.size())
          : std::max<size_t>(1, (max_ops - 1) / (2 * kPurgeOpsPerInode));
  std::vector<int32_t> out(inos.size(), 0);
  std::vector<ObsoleteStripe> dropped;
  for (size_t i = 0; i < inos.size(); i += group) {
    const size_t n = std::min(group, inos.size() - i);
    STRIPEFS_RETURN_IF_ERROR(PurgeInodeGroup(&inos[i], n, &out[i], &dropped));
  }
  *codes = std::move(out);
  if (obsolete)
    obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
  return Status::Ok();
}

Status MetaStore::PurgeInodeGroup(const uint64_t* inos, size_t n,
                                  int32_t* codes,
                                  std::vector<ObsoleteStripe>* dropped) {
  const size_t before = dropped->size();
  return MutateNamespace([&]() -> Status {
    dropped->resize(before);
    Mutation m(this);
    for (size_t i = 0; i < n; ++i)
      codes[i] = PurgeOne(m, inos[i], dropped).code();
    Status st = m.Commit();
    if (!st.ok()) dropped->resize(before);
    return st;
  });
}

Status MetaStore::ListOrphanStripes(const std::vector<uint64_t>& inos,
                                    std::vector<int32_t>* codes,
                                    std::vector<ObsoleteStripe>* stripes) {
  codes->clear();
  if (inos.size() > kMaxInodesPerPurge) return TooManyToPurge(inos.size());
  std::vector<int32_t> out(inos.size(), 0);
  std::vector<ObsoleteStripe> found;
  // Some listed orphan has chunks the caller will delete (or too many to
  // list here: it pages them with GetStripes and deletes them).
  bool chunks_to_delete = false;
  {
    SnapshotReader r(kv_.get());
    for (size_t i = 0; i < inos.size(); ++i) {
      const uint64_t ino = inos[i];
      auto rec = r.Inode(ino);
      if (!rec.ok()) {
        out[i] = rec.status().code();
        continue;
      }
      if (rec->attr.nlink != 0) {
        out[i] = EBUSY;
        continue;
      }
      // One more than the room left tells "too many" without reading all.
      const size_t room = kMaxOrphanStripes - found.size();
      const std::string prefix = StripePrefix(ino);
      auto pairs = r.Range(prefix, PrefixEnd(prefix), room + 1);
      if (!pairs.ok()) {
        out[i] = pairs.status().code();
        continue;
      }
      if (pairs->size() > room) {
        out[i] = E2BIG;  // still an orphan: its unlink is synced below
        chunks_to_delete = true;
        continue;
      }
      const size_t before = found.size();
      for (const KvPair& p : *pairs) {
        auto ref = ParseStripe(p.key, p.value);
        if (!ref.ok()) {
          out[i] = ref.status().code();
          break;
        }
        found.push_back({ino, ref->sv.stripe, ref->sv.version});
      }
      if (out[i] != 0) {
        found.resize(before);
        continue;
      }
      if (found.size() > before) chunks_to_delete = true;
    }
  }
  // The unlinks that made these orphans may have been acknowledged before
  // their WAL sync: make them durable before anyone deletes chunks. Orphans
  // without stripes (empty files: every unlink of `bench write` row f) need
  // no sync: nothing is deleted on their strength, and their purge commit
  // comes after their unlink in the one WAL, so a crash can lose the purge
  // (the orphan is queued again at the next mount) or both, never the
  // unlink alone.
  if (chunks_to_delete) STRIPEFS_RETURN_IF_ERROR(Sync());
  *codes = std::move(out);
  stripes->insert(stripes->end(), found.begin(), found.end());
  return Status::Ok();
}

Result<std::vector<uint64_t>> MetaStore::ListOrphans() {
  SnapshotReader r(kv_.get());
  std::string prefix(1, kPrefixOrphan);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> orphans,
                            r.Range(prefix, PrefixEnd(prefix)));
  std::vector<uint64_t> out;
  for (const KvPair& p : orphans) {
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t ino, ParseOrphanIno(p.key));
    out.push_back(ino);
  }
  return out;
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

// --- xattrs ---------------------------------------------------------------

Status MetaStore::SetXattr(uint64_t ino, const std::string& name,
                           const std::string& value, uint32_t flags) {
  STRIPEFS_RETURN_IF_ERROR(ValidateXattrName(name));
  if (value.size() > kXattrValueMax) {
    return Status(E2BIG, "xattr value of " + std::to_string(value.size()) +
                             " bytes is larger than 64 KiB");
  }
  if ((flags & ~(kXattrCreate | kXattrReplace)) != 0 ||
      flags == (kXattrCreate | kXattrReplace)) {
    return Status::InvalidArgument("unsupported xattr flags " +
                                   std::to_string(flags));
  }
  return MutateNamespace([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    std::string key = XattrKey(ino, name);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> old, m.txn().Get(key));
    if (old && (flags & kXattrCreate)) {
      return Status::Exists("xattr '" + name + "' already exists");
    }
    if (!old && (flags & kXattrReplace)) {
      return Status(ENODATA, "xattr '" + name + "' does not exist");
    }
    m.txn().Put(key, value);
    rec->attr.ctime = m.now();
    return m.Commit();
  });
}

Result<std::string> MetaStore::GetXattr(uint64_t ino, const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateXattrName(name));
  SnapshotReader r(kv_.get());
  STRIPEFS_RETURN_IF_ERROR(r.Inode(ino).status());
  auto v = r.Get(XattrKey(ino, name), "xattr");
  if (!v.ok() && v.status().code() == ENOENT) {
    return Status(ENODATA, "xattr '" + name + "' does not exist");
  }
  return v;
}

Result<std::vector<std::string>> MetaStore::ListXattr(uint64_t ino) {
  SnapshotReader r(kv_.get());
  STRIPEFS_RETURN_IF_ERROR(r.Inode(ino).status());
  std::string prefix = XattrPrefix(ino);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> xattrs,
                            r.Range(prefix, PrefixEnd(prefix)));
  std::vector<std::string> out;
  for (const KvPair& p : xattrs) {
    STRIPEFS_ASSIGN_OR_RETURN(std::string name, ParseXattrName(p.key));
    out.push_back(std::move(name));
  }
  return out;
}

Status MetaStore::RemoveXattr(uint64_t ino, const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateXattrName(name));
  return MutateNamespace([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    std::string key = XattrKey(ino, name);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> old, m.txn().Get(key));
    if (!old) {
      return Status(ENODATA, "xattr '" + name + "' does not exist");
    }
    m.txn().Delete(key);
    rec->attr.ctime = m.now();
    return m.Commit();
  });
}

// --- stripe map -----------------------------------------------------------

Result<uint64_t> MetaStore::AllocateVersions(uint32_t count) {
  if (count == 0) return Status::InvalidArgument("AllocateVersions(0)");
  uint64_t first = 0;
  uint64_t reserved_seq = 0;  // the write that made `first` durable
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (next_version_ >
        std::numeric_limits<uint64_t>::max() - count - options_.version_batch) {
      return Status(EOVERFLOW, "stripe version numbers exhausted");
    }
    if (next_version_ + count > version_limit_) {
      // Reserve a batch durably before handing any of it out; after a crash
      // LoadState resumes at the reserved limit, so nothing is reused. The
      // stored limit is shared by every MetaStore of the volume: if another
      // one reserved since, this one's rest is skipped.
      for (int attempt = 1;; ++attempt) {
        std::unique_ptr<KvTxn> txn = kv_->Begin();
        STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                                  txn->Get(MetaKey(kMetaVersionLimit)));
        if (!v) return Status::Corruption("version counter is missing");
        STRIPEFS_ASSIGN_OR_RETURN(uint64_t stored, DecodeU64(*v));
        const uint64_t start =
            stored == version_limit_ ? next_version_ : stored;
        if (start > std::numeric_limits<uint64_t>::max() - count -
                        options_.version_batch) {
          return Status(EOVERFLOW, "stripe version numbers exhausted");
        }
        uint64_t limit = start + count + options_.version_batch;
        txn->Put(MetaKey(kMetaVersionLimit), EncodeU64(limit));
        auto ticket = txn->Commit();
        if (ticket.status().code() == kKvConflict && attempt < kMaxAttempts) {
          BackOff(attempt);
          continue;
        }
        STRIPEFS_RETURN_IF_ERROR(ticket.status());
        next_version_ = start;
        version_limit_ = limit;
        version_limit_seq_ = *ticket;
        break;
      }
    }
    first = next_version_;
    next_version_ += count;
    reserved_seq = version_limit_seq_;
  }
  // Only the reservation must be durable (even with options_.sync off:
  // reusing a version after a crash would make two versions of a stripe
  // indistinguishable); other mutations' writes need not be waited for.
  STRIPEFS_RETURN_IF_ERROR(kv_->WaitDurable(reserved_seq));
  return first;
}

Result<std::vector<StripeVersion>> MetaStore::GetStripes(uint64_t ino,
                                                         uint64_t first,
                                                         uint64_t count) {
  SnapshotReader r(kv_.get());
  STRIPEFS_RETURN_IF_ERROR(r.Inode(ino).status());
  std::vector<StripeVersion> out;
  if (count == 0) return out;
  std::string end = first > std::numeric_limits<uint64_t>::max() - count
                        ? PrefixEnd(StripePrefix(ino))
                        : StripeKey(ino, first + count);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> stripes,
                            r.Range(StripeKey(ino, first), end));
  for (const KvPair& p : stripes) {
    STRIPEFS_ASSIGN_OR_RETURN(StripeRef ref, ParseStripe(p.key, p.value));
    out.push_back(ref.sv);
  }
  return out;
}

Status MetaStore::ValidateStripeCommit(const StripeCommit& c) const {
  const StripeVersion& sv = c.sv;
  const uint32_t width = geometry_.k + geometry_.m;
  if (sv.version == 0 || sv.version == c.expected_version) {
    return Status::InvalidArgument("CommitStripe needs a fresh version (got " +
                                   std::to_string(sv.version) + ", expected " +
                                   std::to_string(c.expected_version) + ")");
  }
  if ((width < 32 && (sv.missing_mask >> width) != 0) ||
      static_cast<uint32_t>(std::popcount(sv.missing_mask)) > geometry_.m) {
    return Status::InvalidArgument(
        "missing mask " + std::to_string(sv.missing_mask) +
        " is impossible for a " + std::to_string(geometry_.k) + "+" +
        std::to_string(geometry_.m) +
        " stripe (more than m chunks missing "
        "or bits past k+m)");
  }
  if (sv.chunk_len > geometry_.cell_size) {
    return Status::InvalidArgument(
        "chunk length " + std::to_string(sv.chunk_len) +
        " is larger than the cell size " + std::to_string(geometry_.cell_size));
  }
  if (sv.stripe >=
      std::numeric_limits<uint64_t>::max() / geometry_.stripe_size()) {
    return Status::InvalidArgument("stripe number " +
                                   std::to_string(sv.stripe) + " is too large");
  }
  return Status::Ok();
}

Status MetaStore::CommitStripe(uint64_t ino, const StripeVersion& sv,
                               uint64_t expected_version,
                               uint64_t min_file_size,
                               ObsoleteStripe* obsolete) {
  if (obsolete) *obsolete = ObsoleteStripe{ino, sv.stripe, 0};
  std::vector<ObsoleteStripe> replaced;
  STRIPEFS_RETURN_IF_ERROR(CommitStripes(
      ino, {StripeCommit{sv, expected_version}}, min_file_size, &replaced));
  if (obsolete) *obsolete = replaced.at(0);
  return Status::Ok();
}

Status MetaStore::CommitStripes(uint64_t ino,
                                const std::vector<StripeCommit>& commits,
                                uint64_t min_file_size,
                                std::vector<ObsoleteStripe>* obsolete) {
  return CommitStripesImpl(ino, commits, min_file_size, /*stamp=*/true,
                           obsolete);
}

Status MetaStore::CommitStripesKeepTimes(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete) {
  return CommitStripesImpl(ino, commits, min_file_size, /*stamp=*/false,
                           obsolete);
}

Status MetaStore::CommitStripesImpl(uint64_t ino,
                                    const std::vector<StripeCommit>& commits,
                                    uint64_t min_file_size, bool stamp,
                                    std::vector<ObsoleteStripe>* obsolete) {
  if (obsolete) obsolete->clear();
  if (commits.empty()) return Status::InvalidArgument("no stripes to commit");
  if (commits.size() > kMaxStripesPerCommit) {
    return Status::InvalidArgument(
        std::to_string(commits.size()) + " stripes in one commit, at most " +
        std::to_string(kMaxStripesPerCommit) + "; split the commit");
  }
  std::set<uint64_t> seen;
  uint64_t last = 0;
  for (const StripeCommit& c : commits) {
    STRIPEFS_RETURN_IF_ERROR(ValidateStripeCommit(c));
    if (!seen.insert(c.sv.stripe).second) {
      return Status::InvalidArgument("stripe " + std::to_string(c.sv.stripe) +
                                     " appears twice in one commit");
    }
    last = std::max(last, c.sv.stripe);
  }
  if (min_file_size > (last + 1) * geometry_.stripe_size()) {
    return Status::InvalidArgument(
        "min_file_size " + std::to_string(min_file_size) +
        " lies beyond the end of stripe " + std::to_string(last));
  }
  // An engine that bounds transactions gets groups that fit (a stripe is
  // one write and one read, plus the inode and statistics records).
  const size_t max_ops = kv_->limits().max_ops;
  const size_t group =
      max_ops == 0 ? commits.size() : std::max<size_t>(1, max_ops / 2);
  std::vector<ObsoleteStripe> replaced;
  for (size_t i = 0; i < commits.size(); i += group) {
    const size_t n = std::min(group, commits.size() - i);
    const bool last_group = i + n == commits.size();
    STRIPEFS_RETURN_IF_ERROR(CommitStripeGroup(
        ino, &commits[i], n, last_group ? min_file_size : 0, stamp, &replaced));
  }
  if (obsolete) *obsolete = std::move(replaced);
  return Status::Ok();
}

Status MetaStore::CommitStripeGroup(uint64_t ino, const StripeCommit* commits,
                                    size_t n, uint64_t min_file_size,
                                    bool stamp,
                                    std::vector<ObsoleteStripe>* replaced) {
  const size_t replaced_before = replaced->size();
  return Mutate([&]() -> Status {
    replaced->resize(replaced_before);
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    InodeAttr& a = rec->attr;
    if (!IsReg(a.mode)) {
      return Status(IsDir(a.mode) ? EISDIR : EINVAL,
                    InoStr(ino) + " is not a regular file");
    }
    for (size_t i = 0; i < n; ++i) {
      const StripeCommit& c = commits[i];
      const StripeVersion& sv = c.sv;
      STRIPEFS_RETURN_IF_ERROR(CheckAllocated(sv.version));
      std::string key = StripeKey(ino, sv.stripe);
      STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v, m.txn().Get(key));
      StripeVersion cur;
      if (v) STRIPEFS_RETURN_IF_ERROR(DecodeStripeValue(*v, &cur));
      if (cur.version != c.expected_version) {
        return Status(ESTALE,
                      "stripe " + std::to_string(sv.stripe) + " of " +
                          InoStr(ino) + " is at version " +
                          std::to_string(cur.version) + ", not " +
                          std::to_string(c.expected_version) +
                          " (someone else committed; re-read and retry)");
      }
      m.txn().Put(key,
                  EncodeStripeValue(sv.version, sv.missing_mask, sv.chunk_len));
      replaced->push_back(ObsoleteStripe{ino, sv.stripe, cur.version});
    }
    if (min_file_size > a.size) {
      m.stats().bytes_used += min_file_size - a.size;
      a.size = min_file_size;
    }
    if (stamp) a.mtime = a.ctime = m.now();
    return m.Commit();
  });
}

Status MetaStore::CheckAllocated(uint64_t version) {
  // Versions below next_version_ were handed out here or by another
  // MetaStore of the volume; [next_version_, version_limit_) is reserved
  // here but not handed out; others reserve below the stored limit.
  bool allocated = version < next_version_;
  if (!allocated && version >= version_limit_) {
    STRIPEFS_ASSIGN_OR_RETURN(
        std::string v, Get(MetaKey(kMetaVersionLimit), "version counter"));
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t stored, DecodeU64(v));
    allocated = version < stored;
  }
  if (!allocated) {
    return Status::InvalidArgument("stripe version " + std::to_string(version) +
                                   " was never allocated (AllocateVersions)");
  }
  return Status::Ok();
}

Status MetaStore::SetStripeMissing(uint64_t ino, uint64_t stripe,
                                   uint64_t version, uint32_t missing_mask) {
  const uint32_t width = geometry_.k + geometry_.m;
  if (width < 32 && (missing_mask >> width) != 0) {
    return Status::InvalidArgument("missing mask has bits past k+m");
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    std::string key = StripeKey(ino, stripe);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v, m.txn().Get(key));
    StripeVersion cur;
    if (v) STRIPEFS_RETURN_IF_ERROR(DecodeStripeValue(*v, &cur));
    if (cur.version != version) {
      return Status(ESTALE, "stripe " + std::to_string(stripe) + " of " +
                                InoStr(ino) + " is at version " +
                                std::to_string(cur.version) + ", not " +
                                std::to_string(version));
    }
    if (cur.missing_mask == missing_mask) return Status::Ok();
    m.txn().Put(key, EncodeStripeValue(version, missing_mask, cur.chunk_len));
    return m.Commit();
  });
}

Result<std::vector<StripeRef>> MetaStore::ListStripes(uint64_t after_inode,
                                                      uint64_t after_stripe,
                                                      uint32_t limit) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  std::vector<StripeRef> out;
  std::string start;
  if (after_stripe != kMax) {
    start = StripeKey(after_inode, after_stripe + 1);
  } else if (after_inode != kMax) {
    start = StripeKey(after_inode + 1, 0);
  } else {
    return out;
  }
  SnapshotReader r(kv_.get());
  if (limit == 0) return out;
  STRIPEFS_ASSIGN_OR_RETURN(
      std::vector<KvPair> stripes,
      r.Range(start, PrefixEnd(std::string(1, kPrefixStripe)), limit));
  for (const KvPair& p : stripes) {
    STRIPEFS_ASSIGN_OR_RETURN(StripeRef ref, ParseStripe(p.key, p.value));
    out.push_back(ref);
  }
  return out;
}

}  // namespace stripefs

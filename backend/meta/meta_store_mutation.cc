#include "backend/meta/meta_store_mutation.h"

#include <ctime>
#include <utility>

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)

namespace meta_internal {

Timespec Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return Timespec{ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}

Result<std::string> SnapshotReader::Get(const std::string& key,
                                        const std::string& what) {
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v, r_->Get(key));
  if (!v) return Status::NotFound(what + " does not exist");
  return std::move(*v);
}

Result<InodeRecord> SnapshotReader::Inode(uint64_t ino) {
  STRIPEFS_ASSIGN_OR_RETURN(std::string v, Get(InodeKey(ino), InoStr(ino)));
  return DecodeInode(v);
}

Result<InodeRecord> SnapshotReader::Dir(uint64_t ino) {
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord rec, Inode(ino));
  if (!IsDir(rec.attr.mode)) {
    return Status(ENOTDIR, InoStr(ino) + " is not a directory");
  }
  return rec;
}

}  // namespace meta_internal

using meta_internal::InoStr;
using meta_internal::IsDir;
using meta_internal::IsReg;

MetaStore::Mutation::Mutation(MetaStore* s)
    : store_(s), txn_(s->kv_->Begin()), now_(meta_internal::Now()) {}

MetaStore::Mutation::~Mutation() {
  store_->mu_.AssertHeld();  // a Mutation lives inside Mutate
  if (committed_) return;
  for (auto it = taken_.rbegin(); it != taken_.rend(); ++it) {
    store_->inodes_.GiveBack(*it);
  }
}

FsStats& MetaStore::Mutation::stats() {
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

Result<InodeRecord*> MetaStore::Mutation::Inode(uint64_t ino) {
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

Result<InodeRecord*> MetaStore::Mutation::Modify(uint64_t ino) {
  auto r = Inode(ino);
  if (r.ok()) dirty_.insert(ino);
  return r;
}

Result<InodeRecord*> MetaStore::Mutation::ModifyDir(uint64_t ino) {
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, Modify(ino));
  if (!IsDir(rec->attr.mode)) {
    return Status(ENOTDIR, InoStr(ino) + " is not a directory");
  }
  return rec;
}

Result<InodeRecord*> MetaStore::Mutation::NewInode() {
  store_->mu_.AssertHeld();  // a Mutation lives inside Mutate
  STRIPEFS_ASSIGN_OR_RETURN(uint64_t ino,
                            store_->inodes_.Take(&store_->lease_conflicts_));
  taken_.push_back(ino);
  InodeRecord& rec = inodes_[ino];
  rec.attr.ino = ino;
  rec.attr.generation = 1;
  rec.attr.atime = rec.attr.mtime = rec.attr.ctime = now_;
  dirty_.insert(ino);
  stats().inodes++;
  return &rec;
}

Status MetaStore::Mutation::DeleteInode(uint64_t ino) {
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

Status MetaStore::Mutation::OrphanDirectory(uint64_t ino) {
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, Modify(ino));
  rec->attr.nlink = 0;
  rec->attr.ctime = now_;
  txn_->Put(OrphanKey(ino), "");
  return Status::Ok();
}

Result<std::optional<DentryValue>> MetaStore::Mutation::GetDentry(
    uint64_t parent, const std::string& name) {
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                            txn_->Get(DentryKey(parent, name)));
  if (!v) return std::optional<DentryValue>();
  STRIPEFS_ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(*v));
  return std::optional<DentryValue>(d);
}

void MetaStore::Mutation::PutDentry(uint64_t parent, const std::string& name,
                                    const DentryValue& d) {
  txn_->Put(DentryKey(parent, name), EncodeDentry(d));
  txn_->Put(CookieKey(parent, d.seq), name);
}

void MetaStore::Mutation::DeleteDentry(uint64_t parent, const std::string& name,
                                       uint64_t seq) {
  txn_->Delete(DentryKey(parent, name));
  txn_->Delete(CookieKey(parent, seq));
}

Result<bool> MetaStore::Mutation::DirIsEmpty(uint64_t dir) {
  std::string prefix = DentryPrefix(dir);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> first,
                            txn_->Scan(prefix, PrefixEnd(prefix), 1));
  return first.empty();
}

Status MetaStore::Mutation::Commit() {
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

}  // namespace stripefs

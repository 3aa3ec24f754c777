#include "backend/client/holding_meta_service.h"

#include <sys/stat.h>

#include <algorithm>
#include <thread>
#include <type_traits>

namespace stripefs {

namespace {
using Clock = std::chrono::steady_clock;

const Status& StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}
}  // namespace

HoldingMetaService::HoldingMetaService(std::unique_ptr<MetaService> inner,
                                       MetaHoldOptions options)
    : inner_(std::move(inner)), options_(options) {}

bool HoldingMetaService::IsOutage(const Status& st) {
  switch (st.code()) {
    case EHOSTDOWN:
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ETIMEDOUT:
      return true;
    default:
      return false;
  }
}

template <typename Call>
auto HoldingMetaService::Hold(const char* what, bool* retried, Call&& call)
    -> decltype(call()) {
  if (retried) *retried = false;
  auto r = call();
  if (!IsOutage(StatusOf(r))) return r;
  held_calls_.fetch_add(1, std::memory_order_relaxed);
  const auto deadline = Clock::now() + options_.hold;
  auto backoff = std::max(options_.first_backoff, std::chrono::milliseconds(1));
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) {
      expired_calls_.fetch_add(1, std::memory_order_relaxed);
      return Status(
          EIO, std::string("metadata service unreachable for ") +
                   std::to_string(options_.hold.count()) + " ms (" + what +
                   "; hold time --meta-hold-s): " + StatusOf(r).ToString());
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, options_.max_backoff);
    if (retried) *retried = true;
    r = call();
    if (!IsOutage(StatusOf(r))) return r;
  }
}

Result<InodeAttr> HoldingMetaService::ResolveCreated(uint64_t parent,
                                                     const std::string& name,
                                                     uint32_t type,
                                                     uint32_t uid, uint32_t gid,
                                                     Result<InodeAttr> got) {
  if (got.ok() || got.status().code() != EEXIST) return got;
  auto a =
      Hold("Lookup", nullptr, [&] { return inner_->Lookup(parent, name); });
  if (a.ok() && (a->mode & S_IFMT) == type && a->uid == uid && a->gid == gid)
    return a;
  return got;
}

Result<Geometry> HoldingMetaService::GetGeometry() {
  return Hold("GetGeometry", nullptr, [&] { return inner_->GetGeometry(); });
}
Result<ClusterMap> HoldingMetaService::GetClusterMap() {
  return Hold("GetClusterMap", nullptr,
              [&] { return inner_->GetClusterMap(); });
}
Status HoldingMetaService::UpsertServer(const ServerInfo& info) {
  return Hold("UpsertServer", nullptr,
              [&] { return inner_->UpsertServer(info); });
}
Status HoldingMetaService::SetServerState(uint32_t id, ServerState state) {
  return Hold("SetServerState", nullptr,
              [&] { return inner_->SetServerState(id, state); });
}
Result<InodeAttr> HoldingMetaService::Lookup(uint64_t parent,
                                             const std::string& name) {
  return Hold("Lookup", nullptr, [&] { return inner_->Lookup(parent, name); });
}
Result<InodeAttr> HoldingMetaService::GetAttr(uint64_t ino) {
  return Hold("GetAttr", nullptr, [&] { return inner_->GetAttr(ino); });
}
Result<InodeAttr> HoldingMetaService::SetAttr(
    uint64_t ino, const SetAttrRequest& req,
    std::vector<ObsoleteStripe>* obsolete) {
  // Absolute values: applying twice is applying once.
  return Hold("SetAttr", nullptr, [&] {
    if (obsolete) obsolete->clear();
    return inner_->SetAttr(ino, req, obsolete);
  });
}
Result<InodeAttr> HoldingMetaService::MkNode(uint64_t parent,
                                             const std::string& name,
                                             uint32_t mode, uint32_t uid,
                                             uint32_t gid, uint32_t rdev) {
  bool retried = false;
  auto r = Hold("MkNode", &retried, [&] {
    return inner_->MkNode(parent, name, mode, uid, gid, rdev);
  });
  if (!retried) return r;
  return ResolveCreated(parent, name, mode & S_IFMT, uid, gid, std::move(r));
}
Result<InodeAttr> HoldingMetaService::Mkdir(uint64_t parent,
                                            const std::string& name,
                                            uint32_t mode, uint32_t uid,
                                            uint32_t gid) {
  bool retried = false;
  auto r = Hold("Mkdir", &retried,
                [&] { return inner_->Mkdir(parent, name, mode, uid, gid); });
  if (!retried) return r;
  return ResolveCreated(parent, name, S_IFDIR, uid, gid, std::move(r));
}
Result<InodeAttr> HoldingMetaService::Symlink(uint64_t parent,
                                              const std::string& name,
                                              const std::string& target,
                                              uint32_t uid, uint32_t gid) {
  bool retried = false;
  auto r = Hold("Symlink", &retried, [&] {
    return inner_->Symlink(parent, name, target, uid, gid);
  });
  if (!retried) return r;
  return ResolveCreated(parent, name, S_IFLNK, uid, gid, std::move(r));
}
Result<std::string> HoldingMetaService::ReadLink(uint64_t ino) {
  return Hold("ReadLink", nullptr, [&] { return inner_->ReadLink(ino); });
}
Result<InodeAttr> HoldingMetaService::Link(uint64_t ino, uint64_t new_parent,
                                           const std::string& new_name) {
  bool retried = false;
  auto r = Hold("Link", &retried,
                [&] { return inner_->Link(ino, new_parent, new_name); });
  if (!retried || r.ok() || r.status().code() != EEXIST) return r;
  auto a = Hold("Lookup", nullptr,
                [&] { return inner_->Lookup(new_parent, new_name); });
  return a.ok() && a->ino == ino ? a : r;
}
Result<InodeAttr> HoldingMetaService::Unlink(uint64_t parent,
                                             const std::string& name) {
  return Hold("Unlink", nullptr, [&] { return inner_->Unlink(parent, name); });
}
Result<EntryChange> HoldingMetaService::CreateEntry(
    const CreateEntryRequest& req) {
  bool retried = false;
  auto r =
      Hold("CreateEntry", &retried, [&] { return inner_->CreateEntry(req); });
  if (!retried || r.ok() || r.status().code() != EEXIST) return r;
  auto a = Hold("Lookup", nullptr,
                [&] { return inner_->Lookup(req.parent, req.name); });
  const uint32_t type = (req.mode & S_IFMT) ? (req.mode & S_IFMT) : S_IFREG;
  if (!a.ok() || (a->mode & S_IFMT) != type || a->uid != req.uid ||
      (a->gid != req.gid && !(req.flags & kCreateInheritSetgid)))
    return r;
  auto p =
      Hold("GetAttr", nullptr, [&] { return inner_->GetAttr(req.parent); });
  if (!p.ok()) return p.status();
  return EntryChange{*a, *p};
}
Result<EntryChange> HoldingMetaService::UnlinkEntry(uint64_t parent,
                                                    const std::string& name) {
  return Hold("UnlinkEntry", nullptr,
              [&] { return inner_->UnlinkEntry(parent, name); });
}
Status HoldingMetaService::Rmdir(uint64_t parent, const std::string& name) {
  bool retried = false;
  Status st =
      Hold("Rmdir", &retried, [&] { return inner_->Rmdir(parent, name); });
  if (retried && st.code() == ENOENT) return Status::Ok();
  return st;
}
Status HoldingMetaService::Rename(uint64_t parent, const std::string& name,
                                  uint64_t new_parent,
                                  const std::string& new_name, uint32_t flags,
                                  uint64_t* replaced) {
  bool retried = false;
  Status st = Hold("Rename", &retried, [&] {
    return inner_->Rename(parent, name, new_parent, new_name, flags, replaced);
  });
  if (!retried || st.code() != ENOENT) return st;
  auto gone =
      Hold("Lookup", nullptr, [&] { return inner_->Lookup(parent, name); });
  auto there = Hold("Lookup", nullptr,
                    [&] { return inner_->Lookup(new_parent, new_name); });
  if (!gone.ok() && gone.status().code() == ENOENT && there.ok()) {
    if (replaced) *replaced = 0;  // unknown: an orphan is purged at mount
    return Status::Ok();
  }
  return st;
}
Result<std::vector<DirEntry>> HoldingMetaService::ReadDir(
    uint64_t ino, uint64_t cookie, uint32_t max_entries) {
  return Hold("ReadDir", nullptr,
              [&] { return inner_->ReadDir(ino, cookie, max_entries); });
}
Status HoldingMetaService::PurgeInode(uint64_t ino,
                                      std::vector<ObsoleteStripe>* obsolete) {
  bool retried = false;
  Status st = Hold("PurgeInode", &retried, [&] {
    if (obsolete) obsolete->clear();
    return inner_->PurgeInode(ino, obsolete);
  });
  if (retried && st.code() == ENOENT) return Status::Ok();
  return st;
}
Status HoldingMetaService::Sync() {
  return Hold("Sync", nullptr, [&] { return inner_->Sync(); });
}
Status HoldingMetaService::PurgeInodes(const std::vector<uint64_t>& inos,
                                       std::vector<int32_t>* codes,
                                       std::vector<ObsoleteStripe>* obsolete) {
  bool retried = false;
  std::vector<ObsoleteStripe> got;
  Status st = Hold("PurgeInodes", &retried, [&] {
    got.clear();
    return inner_->PurgeInodes(inos, codes, &got);
  });
  if (!st.ok()) return st;
  if (retried) {
    for (int32_t& c : *codes) {
      if (c == ENOENT) c = 0;  // purged by the attempt whose reply was lost
    }
  }
  if (obsolete) obsolete->insert(obsolete->end(), got.begin(), got.end());
  return Status::Ok();
}
Status HoldingMetaService::ListOrphanStripes(
    const std::vector<uint64_t>& inos, std::vector<int32_t>* codes,
    std::vector<ObsoleteStripe>* stripes) {
  // A read (plus a sync): retrying it is safe as is.
  std::vector<ObsoleteStripe> got;
  Status st = Hold("ListOrphanStripes", nullptr, [&] {
    got.clear();
    return inner_->ListOrphanStripes(inos, codes, &got);
  });
  if (!st.ok()) return st;
  stripes->insert(stripes->end(), got.begin(), got.end());
  return Status::Ok();
}
Result<std::vector<uint64_t>> HoldingMetaService::ListOrphans() {
  return Hold("ListOrphans", nullptr, [&] { return inner_->ListOrphans(); });
}
Result<FsStats> HoldingMetaService::StatFs() {
  return Hold("StatFs", nullptr, [&] { return inner_->StatFs(); });
}
Status HoldingMetaService::SetXattr(uint64_t ino, const std::string& name,
                                    const std::string& value, uint32_t flags) {
  bool retried = false;
  Status st = Hold("SetXattr", &retried,
                   [&] { return inner_->SetXattr(ino, name, value, flags); });
  if (!retried || st.code() != EEXIST) return st;
  auto have =
      Hold("GetXattr", nullptr, [&] { return inner_->GetXattr(ino, name); });
  return have.ok() && *have == value ? Status::Ok() : st;
}
Result<std::string> HoldingMetaService::GetXattr(uint64_t ino,
                                                 const std::string& name) {
  return Hold("GetXattr", nullptr, [&] { return inner_->GetXattr(ino, name); });
}
Result<std::vector<std::string>> HoldingMetaService::ListXattr(uint64_t ino) {
  return Hold("ListXattr", nullptr, [&] { return inner_->ListXattr(ino); });
}
Status HoldingMetaService::RemoveXattr(uint64_t ino, const std::string& name) {
  bool retried = false;
  Status st = Hold("RemoveXattr", &retried,
                   [&] { return inner_->RemoveXattr(ino, name); });
  if (retried && st.code() == ENODATA) return Status::Ok();
  return st;
}
Result<uint64_t> HoldingMetaService::AllocateVersions(uint32_t count) {
  return Hold("AllocateVersions", nullptr,
              [&] { return inner_->AllocateVersions(count); });
}
Result<std::vector<StripeVersion>> HoldingMetaService::GetStripes(
    uint64_t ino, uint64_t first, uint64_t count) {
  return Hold("GetStripes", nullptr,
              [&] { return inner_->GetStripes(ino, first, count); });
}
Status HoldingMetaService::CommitStripe(uint64_t ino, const StripeVersion& sv,
                                        uint64_t expected_version,
                                        uint64_t min_file_size,
                                        ObsoleteStripe* obsolete) {
  bool retried = false;
  Status st = Hold("CommitStripe", &retried, [&] {
    return inner_->CommitStripe(ino, sv, expected_version, min_file_size,
                                obsolete);
  });
  if (!retried || st.code() != ESTALE) return st;
  // Did the lost reply belong to a commit that went through?
  auto cur = Hold("GetStripes", nullptr,
                  [&] { return inner_->GetStripes(ino, sv.stripe, 1); });
  if (cur.ok() && !cur->empty() && cur->front().stripe == sv.stripe &&
      cur->front().version == sv.version) {
    if (obsolete) *obsolete = ObsoleteStripe{ino, sv.stripe, 0};
    return Status::Ok();
  }
  return st;
}
Status HoldingMetaService::CommitStripes(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete) {
  return CommitStripesHeld(ino, commits, min_file_size, /*keep_times=*/false,
                           obsolete);
}
Status HoldingMetaService::CommitStripesKeepTimes(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete) {
  return CommitStripesHeld(ino, commits, min_file_size, /*keep_times=*/true,
                           obsolete);
}
Status HoldingMetaService::CommitStripesHeld(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    uint64_t min_file_size, bool keep_times,
    std::vector<ObsoleteStripe>* obsolete) {
  bool retried = false;
  Status st = Hold("CommitStripes", &retried, [&] {
    return keep_times
               ? inner_->CommitStripesKeepTimes(ino, commits, min_file_size,
                                                obsolete)
               : inner_->CommitStripes(ino, commits, min_file_size, obsolete);
  });
  if (!retried || st.code() != ESTALE) return st;
  // Did the lost reply belong to a batch that went through (all of it: a
  // batch commits atomically)? Then the replaced versions are unknown.
  for (const StripeCommit& c : commits) {
    auto cur = Hold("GetStripes", nullptr,
                    [&] { return inner_->GetStripes(ino, c.sv.stripe, 1); });
    if (!cur.ok() || cur->empty() || cur->front().stripe != c.sv.stripe ||
        cur->front().version != c.sv.version) {
      return st;
    }
  }
  if (obsolete) {
    obsolete->clear();
    for (const StripeCommit& c : commits)
      obsolete->push_back(ObsoleteStripe{ino, c.sv.stripe, 0});
  }
  return Status::Ok();
}
Status HoldingMetaService::SetStripeMissing(uint64_t ino, uint64_t stripe,
                                            uint64_t version,
                                            uint32_t missing_mask) {
  return Hold("SetStripeMissing", nullptr, [&] {
    return inner_->SetStripeMissing(ino, stripe, version, missing_mask);
  });
}
Status HoldingMetaService::DropStripes(uint64_t ino, uint64_t first,
                                       uint64_t count,
                                       std::vector<ObsoleteStripe>* obsolete) {
  // Dropping again after a lost reply finds nothing left: harmless.
  return Hold("DropStripes", nullptr, [&] {
    if (obsolete) obsolete->clear();
    return inner_->DropStripes(ino, first, count, obsolete);
  });
}
Status HoldingMetaService::DropStripesKeepTimes(
    uint64_t ino, uint64_t first, uint64_t count,
    std::vector<ObsoleteStripe>* obsolete) {
  return Hold("DropStripes", nullptr, [&] {
    if (obsolete) obsolete->clear();
    return inner_->DropStripesKeepTimes(ino, first, count, obsolete);
  });
}
Result<std::vector<StripeRef>> HoldingMetaService::ListStripes(
    uint64_t after_inode, uint64_t after_stripe, uint32_t limit) {
  return Hold("ListStripes", nullptr, [&] {
    return inner_->ListStripes(after_inode, after_stripe, limit);
  });
}

}  // namespace stripefs

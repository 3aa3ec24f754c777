// Test-only: a MetaService that forwards to another and counts every call
// (`calls`: the metadata round trips of a file-system operation) and the stripe
// commits it sees, so tests can check how many metadata commits (and
// committed versions) a client operation made, and the attribute and
// stripe-map reads (the read path's metadata round trips), and the purge
// calls (ListOrphanStripes can be made to answer EOPNOTSUPP, as an old
// metad does).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "backend/meta/meta_service.h"

namespace stripefs::testing {

class CountingMetaService final : public MetaService {
 public:
  explicit CountingMetaService(std::unique_ptr<MetaService> inner)
      : inner_(std::move(inner)) {}

  std::atomic<int> commit_calls{0};            // CommitStripe + CommitStripes
  std::atomic<int> stripes_committed{0};       // versions made current
  std::atomic<bool> batch_unsupported{false};  // CommitStripes: EOPNOTSUPP
  std::atomic<int> getattr_calls{0};
  std::atomic<int> getstripes_calls{0};
  std::atomic<int> sync_calls{0};
  std::atomic<int> purge_inode_calls{0};    // PurgeInode
  std::atomic<int> purge_inodes_calls{0};   // PurgeInodes
  std::atomic<int> purge_inodes_inodes{0};  // inodes PurgeInodes carried
  std::atomic<int> list_orphan_stripes_calls{0};
  std::atomic<bool> list_orphan_stripes_unsupported{false};  // EOPNOTSUPP
  std::atomic<int> calls{0};  // every MetaService call, whatever it is
  // CreateEntry/UnlinkEntry/LinkEntry/RenameEntry answer EOPNOTSUPP (as an
  // older metad does).
  std::atomic<bool> entry_calls_unsupported{false};

  Status CommitStripe(uint64_t ino, const StripeVersion& sv, uint64_t expected,
                      uint64_t min_size, ObsoleteStripe* obsolete) override {
    ++calls;
    ++commit_calls;
    Status st = inner_->CommitStripe(ino, sv, expected, min_size, obsolete);
    if (st.ok()) ++stripes_committed;
    return st;
  }
  Status CommitStripes(uint64_t ino, const std::vector<StripeCommit>& commits,
                       uint64_t min_size,
                       std::vector<ObsoleteStripe>* obsolete) override {
    ++calls;
    if (batch_unsupported) return Status::NotSupported("CommitStripes");
    ++commit_calls;
    Status st = inner_->CommitStripes(ino, commits, min_size, obsolete);
    if (st.ok()) stripes_committed += static_cast<int>(commits.size());
    return st;
  }

  // --- forwarded ------------------------------------------------------------
  Result<Geometry> GetGeometry() override {
    ++calls;
    return inner_->GetGeometry();
  }
  Result<ClusterMap> GetClusterMap() override {
    ++calls;
    return inner_->GetClusterMap();
  }
  Status UpsertServer(const ServerInfo& info) override {
    ++calls;
    return inner_->UpsertServer(info);
  }
  Status SetServerState(uint32_t id, ServerState state) override {
    ++calls;
    return inner_->SetServerState(id, state);
  }
  Result<InodeAttr> Lookup(uint64_t parent, const std::string& name) override {
    ++calls;
    return inner_->Lookup(parent, name);
  }
  Result<InodeAttr> GetAttr(uint64_t ino) override {
    ++calls;
    ++getattr_calls;
    return inner_->GetAttr(ino);
  }
  Result<InodeAttr> SetAttr(uint64_t ino, const SetAttrRequest& req,
                            std::vector<ObsoleteStripe>* obsolete) override {
    ++calls;
    return inner_->SetAttr(ino, req, obsolete);
  }
  Result<InodeAttr> MkNode(uint64_t parent, const std::string& name,
                           uint32_t mode, uint32_t uid, uint32_t gid,
                           uint32_t rdev) override {
    ++calls;
    return inner_->MkNode(parent, name, mode, uid, gid, rdev);
  }
  Result<InodeAttr> Mkdir(uint64_t parent, const std::string& name,
                          uint32_t mode, uint32_t uid, uint32_t gid) override {
    ++calls;
    return inner_->Mkdir(parent, name, mode, uid, gid);
  }
  Result<InodeAttr> Symlink(uint64_t parent, const std::string& name,
                            const std::string& target, uint32_t uid,
                            uint32_t gid) override {
    ++calls;
    return inner_->Symlink(parent, name, target, uid, gid);
  }
  Result<std::string> ReadLink(uint64_t ino) override {
    ++calls;
    return inner_->ReadLink(ino);
  }
  Result<InodeAttr> Link(uint64_t ino, uint64_t new_parent,
                         const std::string& new_name) override {
    ++calls;
    return inner_->Link(ino, new_parent, new_name);
  }
  Result<InodeAttr> Unlink(uint64_t parent, const std::string& name) override {
    ++calls;
    return inner_->Unlink(parent, name);
  }
  Result<EntryChange> CreateEntry(const CreateEntryRequest& req) override {
    ++calls;
    if (entry_calls_unsupported) return Status::NotSupported("CreateEntry");
    return inner_->CreateEntry(req);
  }
  Result<EntryChange> UnlinkEntry(uint64_t parent,
                                  const std::string& name) override {
    ++calls;
    if (entry_calls_unsupported) return Status::NotSupported("UnlinkEntry");
    return inner_->UnlinkEntry(parent, name);
  }
  Result<EntryChange> LinkEntry(uint64_t ino, uint64_t new_parent,
                                const std::string& new_name) override {
    ++calls;
    if (entry_calls_unsupported) return Status::NotSupported("LinkEntry");
    return inner_->LinkEntry(ino, new_parent, new_name);
  }
  Result<RenameChange> RenameEntry(uint64_t parent, const std::string& name,
                                   uint64_t new_parent,
                                   const std::string& new_name,
                                   uint32_t flags) override {
    ++calls;
    if (entry_calls_unsupported) return Status::NotSupported("RenameEntry");
    return inner_->RenameEntry(parent, name, new_parent, new_name, flags);
  }
  Status Rmdir(uint64_t parent, const std::string& name) override {
    ++calls;
    return inner_->Rmdir(parent, name);
  }
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                const std::string& new_name, uint32_t flags,
                uint64_t* replaced) override {
    ++calls;
    return inner_->Rename(parent, name, new_parent, new_name, flags, replaced);
  }
  Result<std::vector<DirEntry>> ReadDir(uint64_t ino, uint64_t cookie,
                                        uint32_t max_entries) override {
    ++calls;
    return inner_->ReadDir(ino, cookie, max_entries);
  }
  Status PurgeInode(uint64_t ino,
                    std::vector<ObsoleteStripe>* obsolete) override {
    ++calls;
    ++purge_inode_calls;
    return inner_->PurgeInode(ino, obsolete);
  }
  Status PurgeInodes(const std::vector<uint64_t>& inos,
                     std::vector<int32_t>* codes,
                     std::vector<ObsoleteStripe>* obsolete) override {
    ++calls;
    ++purge_inodes_calls;
    purge_inodes_inodes += static_cast<int>(inos.size());
    return inner_->PurgeInodes(inos, codes, obsolete);
  }
  Status ListOrphanStripes(const std::vector<uint64_t>& inos,
                           std::vector<int32_t>* codes,
                           std::vector<ObsoleteStripe>* stripes) override {
    ++calls;
    if (list_orphan_stripes_unsupported) {
      codes->clear();
      return Status::NotSupported("ListOrphanStripes");
    }
    ++list_orphan_stripes_calls;
    return inner_->ListOrphanStripes(inos, codes, stripes);
  }
  Status Sync() override {
    ++calls;
    ++sync_calls;
    return inner_->Sync();
  }
  Result<std::vector<uint64_t>> ListOrphans() override {
    ++calls;
    return inner_->ListOrphans();
  }
  Result<FsStats> StatFs() override {
    ++calls;
    return inner_->StatFs();
  }
  Status SetXattr(uint64_t ino, const std::string& name,
                  const std::string& value, uint32_t flags) override {
    ++calls;
    return inner_->SetXattr(ino, name, value, flags);
  }
  Result<std::string> GetXattr(uint64_t ino, const std::string& name) override {
    ++calls;
    return inner_->GetXattr(ino, name);
  }
  Result<std::vector<std::string>> ListXattr(uint64_t ino) override {
    ++calls;
    return inner_->ListXattr(ino);
  }
  Status RemoveXattr(uint64_t ino, const std::string& name) override {
    ++calls;
    return inner_->RemoveXattr(ino, name);
  }
  Result<uint64_t> AllocateVersions(uint32_t count) override {
    ++calls;
    return inner_->AllocateVersions(count);
  }
  Result<std::vector<StripeVersion>> GetStripes(uint64_t ino, uint64_t first,
                                                uint64_t count) override {
    ++calls;
    ++getstripes_calls;
    return inner_->GetStripes(ino, first, count);
  }
  Status SetStripeMissing(uint64_t ino, uint64_t stripe, uint64_t version,
                          uint32_t missing_mask) override {
    ++calls;
    return inner_->SetStripeMissing(ino, stripe, version, missing_mask);
  }
  Result<std::vector<StripeRef>> ListStripes(uint64_t after_inode,
                                             uint64_t after_stripe,
                                             uint32_t limit) override {
    ++calls;
    return inner_->ListStripes(after_inode, after_stripe, limit);
  }

 private:
  std::unique_ptr<MetaService> inner_;
};

// Wraps metadata in a CountingMetaService and points *out at it (the
// shape of InProcessVolumeOptions::wrap_meta).
inline std::function<std::unique_ptr<MetaService>(std::unique_ptr<MetaService>)>
CountingWrapper(CountingMetaService** out) {
  return [out](std::unique_ptr<MetaService> inner) {
    auto c = std::make_unique<CountingMetaService>(std::move(inner));
    *out = c.get();
    return std::unique_ptr<MetaService>(std::move(c));
  };
}

}  // namespace stripefs::testing

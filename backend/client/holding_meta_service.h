// HoldingMetaService: a MetaService decorator that turns a metad outage into
// a wait, as an NFS hard mount does, instead of an error.
//
// A call that fails because metad is unreachable (EHOSTDOWN, ECONNREFUSED,
// ECONNRESET, EPIPE or ETIMEDOUT from the RPC stub) is retried with capped
// exponential backoff until it gets an answer or `hold` has passed since its
// first failure; then it fails with EIO (naming the outage and the last
// transport error), never with EHOSTDOWN. Any other error is returned at
// once. hold = 0 retries nothing and still maps outages to EIO.
//
// Ambiguous retries: a transport failure may hide a reply that was lost
// after metad applied the call. Retried calls that are not idempotent are
// resolved where the answer tells: MkNode/Mkdir/Symlink/Link getting EEXIST
// return the entry if it now has the inode type (and owner) asked for;
// Rmdir/PurgeInode getting ENOENT (per inode for PurgeInodes) and
// RemoveXattr getting ENODATA succeed;
// Rename getting ENOENT succeeds if the new name exists and the old does
// not; CommitStripe getting ESTALE succeeds if the committed version is the
// one sent (the replaced version is then unknown: its chunks are left to
// scrub); SetXattr(XATTR_CREATE) getting EEXIST succeeds if the value is
// the one sent. Known limits: a retried Unlink whose first attempt took
// effect reports ENOENT (the orphan it left is purged at the next mount);
// a name created by another client inside the lost-reply window is taken
// for ours; AllocateVersions may waste the lost range (never reused).
//
// Ownership: owns the wrapped service. Thread-safety: as the wrapped
// service; each call waits on its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/meta/meta_service.h"

namespace stripefs {

struct MetaHoldOptions {
  std::chrono::milliseconds hold{60000};  // how long an outage is waited out
  std::chrono::milliseconds first_backoff{50};
  std::chrono::milliseconds max_backoff{2000};
};

class HoldingMetaService final : public MetaService {
 public:
  HoldingMetaService(std::unique_ptr<MetaService> inner,
                     MetaHoldOptions options);

  // Whether `st` means metad could not be reached (worth holding for).
  static bool IsOutage(const Status& st);
  // Calls that waited for an outage, and calls that gave up with EIO.
  uint64_t held_calls() const { return held_calls_.load(); }
  uint64_t expired_calls() const { return expired_calls_.load(); }
  MetaService& inner() { return *inner_; }

  Result<Geometry> GetGeometry() override;
  Result<ClusterMap> GetClusterMap() override;
  Status UpsertServer(const ServerInfo& info) override;
  Status SetServerState(uint32_t id, ServerState state) override;
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
  // A retried CreateEntry getting EEXIST resolves as MkNode does (the gid
  // may be the parent's when it asked for setgid inheritance), reading the
  // parent's attributes again; UnlinkEntry is held as Unlink.
  Result<EntryChange> CreateEntry(const CreateEntryRequest& req) override;
  Result<EntryChange> UnlinkEntry(uint64_t parent,
                                  const std::string& name) override;
  Status Rmdir(uint64_t parent, const std::string& name) override;
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                const std::string& new_name, uint32_t flags,
                uint64_t* replaced) override;
  Result<std::vector<DirEntry>> ReadDir(uint64_t ino, uint64_t cookie,
                                        uint32_t max_entries) override;
  Status PurgeInode(uint64_t ino,
                    std::vector<ObsoleteStripe>* obsolete) override;
  Status Sync() override;
  Status PurgeInodes(const std::vector<uint64_t>& inos,
                     std::vector<int32_t>* codes,
                     std::vector<ObsoleteStripe>* obsolete) override;
  Status ListOrphanStripes(const std::vector<uint64_t>& inos,
                           std::vector<int32_t>* codes,
                           std::vector<ObsoleteStripe>* stripes) override;
  Result<std::vector<uint64_t>> ListOrphans() override;
  Result<FsStats> StatFs() override;
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
  // Forwarded (without it the client fell back to one CommitStripe, and
  // one metadata sync, per stripe); a retried batch getting ESTALE
  // succeeds if every stripe is at the version sent.
  Status CommitStripes(uint64_t ino, const std::vector<StripeCommit>& commits,
                       uint64_t min_file_size,
                       std::vector<ObsoleteStripe>* obsolete) override;
  Status SetStripeMissing(uint64_t ino, uint64_t stripe, uint64_t version,
                          uint32_t missing_mask) override;
  Status DropStripes(uint64_t ino, uint64_t first, uint64_t count,
                     std::vector<ObsoleteStripe>* obsolete) override;
  // As CommitStripes and DropStripes.
  Status CommitStripesKeepTimes(uint64_t ino,
                                const std::vector<StripeCommit>& commits,
                                uint64_t min_file_size,
                                std::vector<ObsoleteStripe>* obsolete) override;
  Status DropStripesKeepTimes(uint64_t ino, uint64_t first, uint64_t count,
                              std::vector<ObsoleteStripe>* obsolete) override;
  Result<std::vector<StripeRef>> ListStripes(uint64_t after_inode,
                                             uint64_t after_stripe,
                                             uint32_t limit) override;

 private:
  // Runs `call` until it is not an outage or the hold expires; *retried is
  // set when an attempt failed with an outage first (the call may have
  // taken effect already).
  template <typename Call>
  auto Hold(const char* what, bool* retried, Call&& call) -> decltype(call());
  // CommitStripes(KeepTimes), and after a retried ESTALE, whether the lost
  // reply's batch went through.
  Status CommitStripesHeld(uint64_t ino,
                           const std::vector<StripeCommit>& commits,
                           uint64_t min_file_size, bool keep_times,
                           std::vector<ObsoleteStripe>* obsolete);
  // A retried create that got EEXIST: the entry, if it looks like ours.
  Result<InodeAttr> ResolveCreated(uint64_t parent, const std::string& name,
                                   uint32_t type, uint32_t uid, uint32_t gid,
                                   Result<InodeAttr> got);

  const std::unique_ptr<MetaService> inner_;
  const MetaHoldOptions options_;
  std::atomic<uint64_t> held_calls_{0};
  std::atomic<uint64_t> expired_calls_{0};
};

}  // namespace stripefs

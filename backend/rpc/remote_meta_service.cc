#include "backend/rpc/remote_meta_service.h"

#include <tuple>
#include <utility>

#include "backend/rpc/typed_call.h"

namespace stripefs::rpc {
namespace {

template <MsgType T>
Status InvokeStatus(RpcClient& c, const typename Msg<T>::Request& req) {
  typename Msg<T>::Response resp{};
  return CallTyped<T>(c, req, &resp);
}

// For messages whose response is a single value.
template <MsgType T>
Result<std::tuple_element_t<0, typename Msg<T>::Response>> InvokeOne(
    RpcClient& c, const typename Msg<T>::Request& req) {
  typename Msg<T>::Response resp{};
  Status s = CallTyped<T>(c, req, &resp);
  if (!s.ok()) return s;
  return std::get<0>(std::move(resp));
}

}  // namespace

RpcClientOptions RemoteMetaService::DefaultOptions() {
  RpcClientOptions o;
  o.peer_role = "metad";
  o.expected_server = {ServerRole::kMetad, 0};
  return o;
}

RemoteMetaService::RemoteMetaService(std::string address,
                                     std::shared_ptr<const ClusterKey> key,
                                     RpcClientOptions options)
    : client_(std::move(address), std::move(key), std::move(options)) {}

Result<ClusterKey> RemoteMetaService::AuthAdd(const IdentityRecord& record) {
  Msg<MsgType::kAuthAdd>::Response resp{};
  STRIPEFS_RETURN_IF_ERROR(
      CallTyped<MsgType::kAuthAdd>(client_, {record}, &resp));
  const std::vector<uint8_t>& salt = std::get<0>(resp);
  EntitySalt s{};
  if (salt.size() != s.size())
    return Status(EPROTO, "metad returned a salt of " +
                              std::to_string(salt.size()) + " bytes");
  std::copy(salt.begin(), salt.end(), s.begin());
  return client_.key().Unwrap(record.entity, s, std::get<1>(resp));
}
Result<std::vector<IdentityRecord>> RemoteMetaService::AuthList() {
  return InvokeOne<MsgType::kAuthList>(client_, {});
}
Status RemoteMetaService::AuthRemove(const std::string& entity) {
  return InvokeStatus<MsgType::kAuthRemove>(client_, {entity});
}

Result<std::pair<EncodedGrant, uint32_t>> RemoteMetaService::GrantChunks(
    uint64_t ino, uint8_t ops) {
  Msg<MsgType::kGrantChunks>::Response resp;
  STRIPEFS_RETURN_IF_ERROR(
      CallTyped<MsgType::kGrantChunks>(client_, {ino, ops}, &resp));
  const std::vector<uint8_t>& bytes = std::get<0>(resp);
  ChunkGrant g;
  if (!DecodeGrant(bytes, &g) || g.inode != ino || (g.ops & ops) != ops)
    return Status(EPROTO, "metad at " + client_.address() +
                              " answered a malformed chunk grant for inode " +
                              std::to_string(ino));
  EncodedGrant out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return std::make_pair(out, std::get<1>(resp));
}

Result<std::string> RemoteMetaService::Ping() {
  return InvokeOne<MsgType::kPing>(client_, {});
}
Status RemoteMetaService::ClientHeartbeat(const ClientRecord& record) {
  return InvokeStatus<MsgType::kClientHeartbeat>(client_, {record});
}
Result<std::vector<ClientRecord>> RemoteMetaService::ListClients() {
  return InvokeOne<MsgType::kListClients>(client_, {});
}
Result<Geometry> RemoteMetaService::GetGeometry() {
  return InvokeOne<MsgType::kGetGeometry>(client_, {});
}
Result<ClusterMap> RemoteMetaService::GetClusterMap() {
  return InvokeOne<MsgType::kGetClusterMap>(client_, {});
}
Status RemoteMetaService::UpsertServer(const ServerInfo& info) {
  return InvokeStatus<MsgType::kUpsertServer>(client_, {info});
}
Status RemoteMetaService::SetServerState(uint32_t id, ServerState state) {
  return InvokeStatus<MsgType::kSetServerState>(client_, {id, state});
}
Result<InodeAttr> RemoteMetaService::Lookup(uint64_t parent,
                                            const std::string& name) {
  return InvokeOne<MsgType::kLookup>(client_, {parent, name});
}
Result<InodeAttr> RemoteMetaService::GetAttr(uint64_t ino) {
  return InvokeOne<MsgType::kGetAttr>(client_, {ino});
}
Result<InodeAttr> RemoteMetaService::SetAttr(
    uint64_t ino, const SetAttrRequest& req,
    std::vector<ObsoleteStripe>* obsolete) {
  Msg<MsgType::kSetAttr>::Response resp{};
  Status s = CallTyped<MsgType::kSetAttr>(client_, {ino, req}, &resp);
  if (!s.ok()) return s;
  if (obsolete) *obsolete = std::move(std::get<1>(resp));
  return std::get<0>(std::move(resp));
}
Result<InodeAttr> RemoteMetaService::MkNode(uint64_t parent,
                                            const std::string& name,
                                            uint32_t mode, uint32_t uid,
                                            uint32_t gid, uint32_t rdev) {
  return InvokeOne<MsgType::kMkNode>(client_,
                                     {parent, name, mode, uid, gid, rdev});
}
Result<InodeAttr> RemoteMetaService::Mkdir(uint64_t parent,
                                           const std::string& name,
                                           uint32_t mode, uint32_t uid,
                                           uint32_t gid) {
  return InvokeOne<MsgType::kMkdir>(client_, {parent, name, mode, uid, gid});
}
Result<InodeAttr> RemoteMetaService::Symlink(uint64_t parent,
                                             const std::string& name,
                                             const std::string& target,
                                             uint32_t uid, uint32_t gid) {
  return InvokeOne<MsgType::kSymlink>(client_,
                                      {parent, name, target, uid, gid});
}
Result<std::string> RemoteMetaService::ReadLink(uint64_t ino) {
  return InvokeOne<MsgType::kReadLink>(client_, {ino});
}
Result<InodeAttr> RemoteMetaService::Link(uint64_t ino, uint64_t new_parent,
                                          const std::string& new_name) {
  return InvokeOne<MsgType::kLink>(client_, {ino, new_parent, new_name});
}
Result<InodeAttr> RemoteMetaService::Unlink(uint64_t parent,
                                            const std::string& name) {
  return InvokeOne<MsgType::kUnlink>(client_, {parent, name});
}
Result<EntryChange> RemoteMetaService::CreateEntry(
    const CreateEntryRequest& req) {
  Msg<MsgType::kCreateEntry>::Response resp{};
  STRIPEFS_RETURN_IF_ERROR(CallTyped<MsgType::kCreateEntry>(
      client_,
      {req.parent, req.name, req.mode, req.uid, req.gid, req.rdev, req.flags},
      &resp));
  return EntryChange{std::get<0>(resp), std::get<1>(resp)};
}
Result<EntryChange> RemoteMetaService::UnlinkEntry(uint64_t parent,
                                                   const std::string& name) {
  Msg<MsgType::kUnlinkEntry>::Response resp{};
  STRIPEFS_RETURN_IF_ERROR(
      CallTyped<MsgType::kUnlinkEntry>(client_, {parent, name}, &resp));
  return EntryChange{std::get<0>(resp), std::get<1>(resp)};
}
Status RemoteMetaService::Rmdir(uint64_t parent, const std::string& name) {
  return InvokeStatus<MsgType::kRmdir>(client_, {parent, name});
}
Status RemoteMetaService::Rename(uint64_t parent, const std::string& name,
                                 uint64_t new_parent,
                                 const std::string& new_name, uint32_t flags,
                                 uint64_t* replaced) {
  auto r = InvokeOne<MsgType::kRename>(
      client_, {parent, name, new_parent, new_name, flags});
  if (!r.ok()) return r.status();
  if (replaced) *replaced = *r;
  return Status::Ok();
}
Result<std::vector<DirEntry>> RemoteMetaService::ReadDir(uint64_t ino,
                                                         uint64_t cookie,
                                                         uint32_t max_entries) {
  return InvokeOne<MsgType::kReadDir>(client_, {ino, cookie, max_entries});
}
Status RemoteMetaService::PurgeInode(uint64_t ino,
                                     std::vector<ObsoleteStripe>* obsolete) {
  auto r = InvokeOne<MsgType::kPurgeInode>(client_, {ino});
  if (!r.ok()) return r.status();
  if (obsolete) *obsolete = std::move(r).value();
  return Status::Ok();
}
Status RemoteMetaService::PurgeInodes(const std::vector<uint64_t>& inos,
                                      std::vector<int32_t>* codes,
                                      std::vector<ObsoleteStripe>* obsolete) {
  codes->clear();
  if (inos.size() > kMaxInodesPerPurge) return TooManyToPurge(inos.size());
  Msg<MsgType::kPurgeInodes>::Response resp{};
  STRIPEFS_RETURN_IF_ERROR(
      CallTyped<MsgType::kPurgeInodes>(client_, {inos}, &resp));
  auto& [got, stripes] = resp;
  if (got.size() != inos.size()) {
    return Status(EPROTO, "PurgeInodes answered " + std::to_string(got.size()) +
                              " results for " + std::to_string(inos.size()) +
                              " inodes (different stripefs versions?)");
  }
  *codes = std::move(got);
  if (obsolete)
    obsolete->insert(obsolete->end(), stripes.begin(), stripes.end());
  return Status::Ok();
}
Status RemoteMetaService::ListOrphanStripes(
    const std::vector<uint64_t>& inos, std::vector<int32_t>* codes,
    std::vector<ObsoleteStripe>* stripes) {
  codes->clear();
  if (inos.size() > kMaxInodesPerPurge) return TooManyToPurge(inos.size());
  Msg<MsgType::kListOrphanStripes>::Response resp{};
  STRIPEFS_RETURN_IF_ERROR(
      CallTyped<MsgType::kListOrphanStripes>(client_, {inos}, &resp));
  auto& [got, listed] = resp;
  if (got.size() != inos.size() || listed.size() > kMaxOrphanStripes) {
    return Status(EPROTO, "ListOrphanStripes answered " +
                              std::to_string(got.size()) + " results and " +
                              std::to_string(listed.size()) + " stripes for " +
                              std::to_string(inos.size()) + " inodes");
  }
  *codes = std::move(got);
  stripes->insert(stripes->end(), listed.begin(), listed.end());
  return Status::Ok();
}
Status RemoteMetaService::Sync() {
  Status st = InvokeStatus<MsgType::kSyncMetadata>(client_, {});
  return st.code() == EOPNOTSUPP ? Status::Ok() : st;
}
Result<std::vector<uint64_t>> RemoteMetaService::ListOrphans() {
  return InvokeOne<MsgType::kListOrphans>(client_, {});
}
Result<FsStats> RemoteMetaService::StatFs() {
  return InvokeOne<MsgType::kStatFs>(client_, {});
}
Status RemoteMetaService::SetXattr(uint64_t ino, const std::string& name,
                                   const std::string& value, uint32_t flags) {
  return InvokeStatus<MsgType::kSetXattr>(client_, {ino, name, value, flags});
}
Result<std::string> RemoteMetaService::GetXattr(uint64_t ino,
                                                const std::string& name) {
  return InvokeOne<MsgType::kGetXattr>(client_, {ino, name});
}
Result<std::vector<std::string>> RemoteMetaService::ListXattr(uint64_t ino) {
  return InvokeOne<MsgType::kListXattr>(client_, {ino});
}
Status RemoteMetaService::RemoveXattr(uint64_t ino, const std::string& name) {
  return InvokeStatus<MsgType::kRemoveXattr>(client_, {ino, name});
}
Result<uint64_t> RemoteMetaService::AllocateVersions(uint32_t count) {
  return InvokeOne<MsgType::kAllocateVersions>(client_, {count});
}
Result<std::vector<StripeVersion>> RemoteMetaService::GetStripes(
    uint64_t ino, uint64_t first, uint64_t count) {
  return InvokeOne<MsgType::kGetStripes>(client_, {ino, first, count});
}
Status RemoteMetaService::CommitStripe(uint64_t ino, const StripeVersion& sv,
                                       uint64_t expected_version,
                                       uint64_t min_file_size,
                                       ObsoleteStripe* obsolete) {
  auto r = InvokeOne<MsgType::kCommitStripe>(
      client_, {ino, sv, expected_version, min_file_size});
  if (!r.ok()) return r.status();
  if (obsolete) *obsolete = *r;
  return Status::Ok();
}
Status RemoteMetaService::CommitStripes(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete) {
  auto r = InvokeOne<MsgType::kCommitStripes>(client_,
                                              {ino, commits, min_file_size});
  if (!r.ok()) return r.status();
  if (obsolete) *obsolete = std::move(r).value();
  return Status::Ok();
}
Status RemoteMetaService::CommitStripesKeepTimes(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete) {
  auto r = InvokeOne<MsgType::kCommitStripesKeepTimes>(
      client_, {ino, commits, min_file_size});
  if (!r.ok()) return r.status();
  if (obsolete) *obsolete = std::move(r).value();
  return Status::Ok();
}
Status RemoteMetaService::SetStripeMissing(uint64_t ino, uint64_t stripe,
                                           uint64_t version,
                                           uint32_t missing_mask) {
  return InvokeStatus<MsgType::kSetStripeMissing>(
      client_, {ino, stripe, version, missing_mask});
}
Status RemoteMetaService::DropStripes(uint64_t ino, uint64_t first,
                                      uint64_t count,
                                      std::vector<ObsoleteStripe>* obsolete) {
  auto r = InvokeOne<MsgType::kDropStripes>(client_, {ino, first, count});
  if (!r.ok()) return r.status();
  if (obsolete) *obsolete = std::move(r).value();
  return Status::Ok();
}
Status RemoteMetaService::DropStripesKeepTimes(
    uint64_t ino, uint64_t first, uint64_t count,
    std::vector<ObsoleteStripe>* obsolete) {
  auto r =
      InvokeOne<MsgType::kDropStripesKeepTimes>(client_, {ino, first, count});
  if (!r.ok()) return r.status();
  if (obsolete) *obsolete = std::move(r).value();
  return Status::Ok();
}
Result<std::vector<StripeRef>> RemoteMetaService::ListStripes(
    uint64_t after_inode, uint64_t after_stripe, uint32_t limit) {
  return InvokeOne<MsgType::kListStripes>(client_,
                                          {after_inode, after_stripe, limit});
}

}  // namespace stripefs::rpc

#include "backend/rpc/remote_meta_service.h"

#include <exception>

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

// Adapts a Result<X> service call to ServeTyped's (out, Status) form.
template <typename Tuple, typename R>
Status Fill(Tuple& out, R&& r) {
  if (!r.ok()) return r.status();
  std::get<0>(out) = std::move(r).value();
  return Status::Ok();
}

}  // namespace

RpcClientOptions RemoteMetaService::DefaultOptions() {
  RpcClientOptions o;
  o.peer_role = "metad";
  return o;
}

RemoteMetaService::RemoteMetaService(std::string address,
                                     std::shared_ptr<const ClusterKey> key,
                                     RpcClientOptions options)
    : client_(std::move(address), std::move(key), std::move(options)) {}

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
Result<std::vector<StripeRef>> RemoteMetaService::ListStripes(
    uint64_t after_inode, uint64_t after_stripe, uint32_t limit) {
  return InvokeOne<MsgType::kListStripes>(client_,
                                          {after_inode, after_stripe, limit});
}

// ---- server
// -------------------------------------------------------------------

void MetaServiceServer::Handle(uint16_t type, std::span<const uint8_t> p,
                               AlignedBytes& /*bulk*/, RpcReply* reply) {
  MetaService& s = *service_;
  try {
    switch (static_cast<MsgType>(type)) {
      case MsgType::kGetGeometry:
        return ServeTyped<MsgType::kGetGeometry>(
            p, reply, [&](auto& out) { return Fill(out, s.GetGeometry()); });
      case MsgType::kGetClusterMap:
        return ServeTyped<MsgType::kGetClusterMap>(
            p, reply, [&](auto& out) { return Fill(out, s.GetClusterMap()); });
      case MsgType::kUpsertServer:
        return ServeTyped<MsgType::kUpsertServer>(
            p, reply, [&](auto&, auto& info) { return s.UpsertServer(info); });
      case MsgType::kSetServerState:
        return ServeTyped<MsgType::kSetServerState>(
            p, reply,
            [&](auto&, auto id, auto st) { return s.SetServerState(id, st); });
      case MsgType::kLookup:
        return ServeTyped<MsgType::kLookup>(
            p, reply, [&](auto& out, auto parent, auto& name) {
              return Fill(out, s.Lookup(parent, name));
            });
      case MsgType::kGetAttr:
        return ServeTyped<MsgType::kGetAttr>(
            p, reply,
            [&](auto& out, auto ino) { return Fill(out, s.GetAttr(ino)); });
      case MsgType::kSetAttr:
        return ServeTyped<MsgType::kSetAttr>(
            p, reply, [&](auto& out, auto ino, auto& req) {
              auto r = s.SetAttr(ino, req, &std::get<1>(out));
              return Fill(out, std::move(r));
            });
      case MsgType::kMkNode:
        return ServeTyped<MsgType::kMkNode>(
            p, reply,
            [&](auto& out, auto parent, auto& name, auto mode, auto uid,
                auto gid, auto rdev) {
              return Fill(out, s.MkNode(parent, name, mode, uid, gid, rdev));
            });
      case MsgType::kMkdir:
        return ServeTyped<MsgType::kMkdir>(
            p, reply,
            [&](auto& out, auto parent, auto& name, auto mode, auto uid,
                auto gid) {
              return Fill(out, s.Mkdir(parent, name, mode, uid, gid));
            });
      case MsgType::kSymlink:
        return ServeTyped<MsgType::kSymlink>(
            p, reply,
            [&](auto& out, auto parent, auto& name, auto& target, auto uid,
                auto gid) {
              return Fill(out, s.Symlink(parent, name, target, uid, gid));
            });
      case MsgType::kReadLink:
        return ServeTyped<MsgType::kReadLink>(
            p, reply,
            [&](auto& out, auto ino) { return Fill(out, s.ReadLink(ino)); });
      case MsgType::kLink:
        return ServeTyped<MsgType::kLink>(
            p, reply, [&](auto& out, auto ino, auto np, auto& nn) {
              return Fill(out, s.Link(ino, np, nn));
            });
      case MsgType::kUnlink:
        return ServeTyped<MsgType::kUnlink>(
            p, reply, [&](auto& out, auto parent, auto& name) {
              return Fill(out, s.Unlink(parent, name));
            });
      case MsgType::kCreateEntry:
        return ServeTyped<MsgType::kCreateEntry>(
            p, reply,
            [&](auto& out, auto parent, auto& name, auto mode, auto uid,
                auto gid, auto rdev, auto flags) -> Status {
              auto r = s.CreateEntry(CreateEntryRequest{parent, name, mode, uid,
                                                        gid, rdev, flags});
              if (!r.ok()) return r.status();
              out = {r->node, r->parent};
              return Status::Ok();
            });
      case MsgType::kUnlinkEntry:
        return ServeTyped<MsgType::kUnlinkEntry>(
            p, reply, [&](auto& out, auto parent, auto& name) -> Status {
              auto r = s.UnlinkEntry(parent, name);
              if (!r.ok()) return r.status();
              out = {r->node, r->parent};
              return Status::Ok();
            });
      case MsgType::kRmdir:
        return ServeTyped<MsgType::kRmdir>(p, reply,
                                           [&](auto&, auto parent, auto& name) {
                                             return s.Rmdir(parent, name);
                                           });
      case MsgType::kRename:
        return ServeTyped<MsgType::kRename>(
            p, reply,
            [&](auto& out, auto parent, auto& name, auto np, auto& nn,
                auto flags) {
              return s.Rename(parent, name, np, nn, flags, &std::get<0>(out));
            });
      case MsgType::kReadDir:
        return ServeTyped<MsgType::kReadDir>(
            p, reply, [&](auto& out, auto ino, auto cookie, auto max) {
              return Fill(out, s.ReadDir(ino, cookie, max));
            });
      case MsgType::kPurgeInode:
        return ServeTyped<MsgType::kPurgeInode>(
            p, reply, [&](auto& out, auto ino) {
              return s.PurgeInode(ino, &std::get<0>(out));
            });
      case MsgType::kPurgeInodes:
        return ServeTyped<MsgType::kPurgeInodes>(
            p, reply, [&](auto& out, auto& inos) {
              return s.PurgeInodes(inos, &std::get<0>(out), &std::get<1>(out));
            });
      case MsgType::kListOrphanStripes:
        return ServeTyped<MsgType::kListOrphanStripes>(
            p, reply, [&](auto& out, auto& inos) {
              return s.ListOrphanStripes(inos, &std::get<0>(out),
                                         &std::get<1>(out));
            });
      case MsgType::kSyncMetadata:
        return ServeTyped<MsgType::kSyncMetadata>(
            p, reply, [&](auto&) { return s.Sync(); });
      case MsgType::kListOrphans:
        return ServeTyped<MsgType::kListOrphans>(
            p, reply, [&](auto& out) { return Fill(out, s.ListOrphans()); });
      case MsgType::kStatFs:
        return ServeTyped<MsgType::kStatFs>(
            p, reply, [&](auto& out) { return Fill(out, s.StatFs()); });
      case MsgType::kSetXattr:
        return ServeTyped<MsgType::kSetXattr>(
            p, reply,
            [&](auto&, auto ino, auto& name, auto& value, auto flags) {
              return s.SetXattr(ino, name, value, flags);
            });
      case MsgType::kGetXattr:
        return ServeTyped<MsgType::kGetXattr>(
            p, reply, [&](auto& out, auto ino, auto& name) {
              return Fill(out, s.GetXattr(ino, name));
            });
      case MsgType::kListXattr:
        return ServeTyped<MsgType::kListXattr>(
            p, reply,
            [&](auto& out, auto ino) { return Fill(out, s.ListXattr(ino)); });
      case MsgType::kRemoveXattr:
        return ServeTyped<MsgType::kRemoveXattr>(
            p, reply, [&](auto&, auto ino, auto& name) {
              return s.RemoveXattr(ino, name);
            });
      case MsgType::kAllocateVersions:
        return ServeTyped<MsgType::kAllocateVersions>(
            p, reply, [&](auto& out, auto count) {
              return Fill(out, s.AllocateVersions(count));
            });
      case MsgType::kGetStripes:
        return ServeTyped<MsgType::kGetStripes>(
            p, reply, [&](auto& out, auto ino, auto first, auto count) {
              return Fill(out, s.GetStripes(ino, first, count));
            });
      case MsgType::kCommitStripe:
        return ServeTyped<MsgType::kCommitStripe>(
            p, reply,
            [&](auto& out, auto ino, auto& sv, auto expected, auto min_size) {
              return s.CommitStripe(ino, sv, expected, min_size,
                                    &std::get<0>(out));
            });
      case MsgType::kCommitStripes:
        return ServeTyped<MsgType::kCommitStripes>(
            p, reply, [&](auto& out, auto ino, auto& commits, auto min_size) {
              return s.CommitStripes(ino, commits, min_size, &std::get<0>(out));
            });
      case MsgType::kSetStripeMissing:
        return ServeTyped<MsgType::kSetStripeMissing>(
            p, reply,
            [&](auto&, auto ino, auto stripe, auto version, auto mask) {
              return s.SetStripeMissing(ino, stripe, version, mask);
            });
      case MsgType::kDropStripes:
        return ServeTyped<MsgType::kDropStripes>(
            p, reply, [&](auto& out, auto ino, auto first, auto count) {
              return s.DropStripes(ino, first, count, &std::get<0>(out));
            });
      case MsgType::kListStripes:
        return ServeTyped<MsgType::kListStripes>(
            p, reply, [&](auto& out, auto ai, auto as, auto limit) {
              return Fill(out, s.ListStripes(ai, as, limit));
            });
      case MsgType::kClientHeartbeat:
        if (!clients_) break;
        return ServeTyped<MsgType::kClientHeartbeat>(
            p, reply, [&](auto&, const ClientRecord& r) {
              return clients_->Heartbeat(r);
            });
      case MsgType::kListClients:
        if (!clients_) break;
        return ServeTyped<MsgType::kListClients>(p, reply, [&](auto& out) {
          std::get<0>(out) = clients_->List();
          return Status::Ok();
        });
      default:
        break;
    }
    const char* name = MsgTypeName(type);
    reply->payload = EncodeErrorResponse(Status::NotSupported(
        std::string("metad does not serve ") +
        (name ? name : "message type " + std::to_string(type)) +
        " (wrong address: is this a chunkd?)"));
  } catch (const std::exception& e) {
    reply->payload = EncodeErrorResponse(
        Status::IoError(std::string("metad internal error: ") + e.what()));
  }
}

}  // namespace stripefs::rpc

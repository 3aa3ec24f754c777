#include "backend/rpc/remote_meta_service.h"

#include <sys/stat.h>

#include <algorithm>
#include <exception>

#include "backend/rpc/dispatch_table.h"
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

// ---- server
// -------------------------------------------------------------------

// The handlers of the dispatch table below: one per message, each decoding
// its wire struct and calling the service.
struct MetaServiceServer::Rows {
  // The subtree checks of a --path client (null for everyone else): `check`
  // runs with the Limit and its refusal is the answer.
  template <typename F>
  static Status Within(MetaServiceServer& m, const RpcCall& c, F check) {
    std::optional<SubtreeGuard::Limit> lim = m.LimitOf(c.caller);
    if (!lim) return Status::Ok();
    return check(*lim);
  }
  static Status Dir(MetaServiceServer& m, const RpcCall& c, uint64_t dir) {
    return Within(m, c, [&](auto& l) { return l.Dir(dir); });
  }
  static Status Node(MetaServiceServer& m, const RpcCall& c, uint64_t ino) {
    return Within(m, c, [&](auto& l) { return l.Node(ino); });
  }
  static Status Visible(MetaServiceServer& m, const RpcCall& c, uint64_t ino) {
    return Within(m, c, [&](auto& l) { return l.Visible(ino); });
  }
  static void Reached(MetaServiceServer& m, const RpcCall& c, uint64_t ino) {
    (void)Within(m, c, [&](auto& l) {
      l.Reached(ino);
      return Status::Ok();
    });
  }
  template <typename R>
  static R Created(MetaServiceServer& m, const RpcCall& c, R r) {
    if (r.ok()) Reached(m, c, r->ino);
    return r;
  }

  // A metad started without a client table (tests) serves no client calls.
  static void NotServed(const RpcCall& c, MsgType t) {
    c.reply->payload = EncodeErrorResponse(Status::NotSupported(
        std::string("metad does not serve ") +
        MsgTypeName(static_cast<uint16_t>(t)) + " (no client table)"));
  }

  static void GetGeometry(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kGetGeometry>(c.payload, c.reply, [&](auto& out) {
      return Fill(out, s.GetGeometry());
    });
  }

  static void GetClusterMap(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kGetClusterMap>(c.payload, c.reply, [&](auto& out) {
      return Fill(out, s.GetClusterMap());
    });
  }

  static void UpsertServer(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kUpsertServer>(
        c.payload, c.reply,
        [&](auto&, auto& info) { return s.UpsertServer(info); });
  }

  static void SetServerState(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kSetServerState>(
        c.payload, c.reply,
        [&](auto&, auto id, auto st) { return s.SetServerState(id, st); });
  }

  static void Lookup(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kLookup>(
        c.payload, c.reply, [&](auto& out, auto parent, auto& name) {
          auto r = s.Lookup(parent, name);
          STRIPEFS_RETURN_IF_ERROR(Within(
              m, c, [&](auto& l) { return l.Looked(parent, name, r); }));
          return Fill(out, std::move(r));
        });
  }

  static void GetAttr(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kGetAttr>(
        c.payload, c.reply, [&](auto& out, auto ino) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Visible(m, c, ino));
          return Fill(out, s.GetAttr(ino));
        });
  }

  static void SetAttr(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kSetAttr>(
        c.payload, c.reply, [&](auto& out, auto ino, auto& req) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          auto r = s.SetAttr(ino, req, &std::get<1>(out));
          return Fill(out, std::move(r));
        });
  }

  static void MkNode(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kMkNode>(
        c.payload, c.reply,
        [&](auto& out, auto parent, auto& name, auto mode, auto uid, auto gid,
            auto rdev) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          return Fill(out, Created(m, c, s.MkNode(parent, name, mode, uid, gid,
                                                  rdev)));
        });
  }

  static void Mkdir(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kMkdir>(
        c.payload, c.reply,
        [&](auto& out, auto parent, auto& name, auto mode, auto uid,
            auto gid) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          return Fill(out, s.Mkdir(parent, name, mode, uid, gid));
        });
  }

  static void Symlink(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kSymlink>(
        c.payload, c.reply,
        [&](auto& out, auto parent, auto& name, auto& target, auto uid,
            auto gid) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          return Fill(out,
                      Created(m, c, s.Symlink(parent, name, target, uid, gid)));
        });
  }

  static void ReadLink(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kReadLink>(
        c.payload, c.reply,
        [&](auto& out, auto ino) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return Fill(out, s.ReadLink(ino));
        });
  }

  static void Link(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kLink>(
        c.payload, c.reply, [&](auto& out, auto ino, auto np, auto& nn) {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, np));
          return Fill(out, s.Link(ino, np, nn));
        });
  }

  static void Unlink(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kUnlink>(
        c.payload, c.reply, [&](auto& out, auto parent, auto& name) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          return Fill(out, s.Unlink(parent, name));
        });
  }

  static void CreateEntry(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kCreateEntry>(
        c.payload, c.reply,
        [&](auto& out, auto parent, auto& name, auto mode, auto uid, auto gid,
            auto rdev, auto flags) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          auto r = s.CreateEntry(
              CreateEntryRequest{parent, name, mode, uid, gid, rdev, flags});
          if (!r.ok()) return r.status();
          if (!S_ISDIR(r->node.mode)) Reached(m, c, r->node.ino);
          out = {r->node, r->parent};
          return Status::Ok();
        });
  }

  static void UnlinkEntry(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kUnlinkEntry>(
        c.payload, c.reply, [&](auto& out, auto parent, auto& name) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          auto r = s.UnlinkEntry(parent, name);
          if (!r.ok()) return r.status();
          out = {r->node, r->parent};
          return Status::Ok();
        });
  }

  static void Rmdir(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kRmdir>(
        c.payload, c.reply,
        [&](auto&, auto parent, auto& name) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          return s.Rmdir(parent, name);
        });
  }

  static void Rename(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kRename>(
        c.payload, c.reply,
        [&](auto& out, auto parent, auto& name, auto np, auto& nn,
            auto flags) -> Status {
          // Both directories: nothing moves into or out of the subtree.
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, np));
          return s.Rename(parent, name, np, nn, flags, &std::get<0>(out));
        });
  }

  static void ReadDir(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kReadDir>(
        c.payload, c.reply,
        [&](auto& out, auto ino, auto cookie, auto max) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Dir(m, c, ino));
          auto r = s.ReadDir(ino, cookie, max);
          if (r.ok()) {
            for (const DirEntry& e : *r)
              if (e.name != "." && e.name != ".." && !S_ISDIR(e.mode))
                Reached(m, c, e.ino);
          }
          return Fill(out, std::move(r));
        });
  }

  static void PurgeInode(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kPurgeInode>(
        c.payload, c.reply, [&](auto& out, auto ino) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.PurgeInode(ino, &std::get<0>(out));
        });
  }

  static void PurgeInodes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kPurgeInodes>(
        c.payload, c.reply, [&](auto& out, auto& inos) -> Status {
          for (uint64_t ino : inos) STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.PurgeInodes(inos, &std::get<0>(out), &std::get<1>(out));
        });
  }

  static void ListOrphanStripes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kListOrphanStripes>(
        c.payload, c.reply, [&](auto& out, auto& inos) -> Status {
          for (uint64_t ino : inos) STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.ListOrphanStripes(inos, &std::get<0>(out),
                                     &std::get<1>(out));
        });
  }

  static void SyncMetadata(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kSyncMetadata>(c.payload, c.reply,
                                       [&](auto&) { return s.Sync(); });
  }

  static void ListOrphans(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kListOrphans>(
        c.payload, c.reply, [&](auto& out) -> Status {
          auto r = s.ListOrphans();
          if (r.ok() && m.LimitOf(c.caller)) {
            // A --path client sees only the orphans it reached.
            std::erase_if(*r, [&](uint64_t ino) {
              return !Node(m, c, ino).ok();
            });
          }
          return Fill(out, std::move(r));
        });
  }

  static void StatFs(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kStatFs>(
        c.payload, c.reply, [&](auto& out) { return Fill(out, s.StatFs()); });
  }

  static void SetXattr(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kSetXattr>(
        c.payload, c.reply,
        [&](auto&, auto ino, auto& name, auto& value, auto flags) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.SetXattr(ino, name, value, flags);
        });
  }

  static void GetXattr(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kGetXattr>(
        c.payload, c.reply, [&](auto& out, auto ino, auto& name) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Visible(m, c, ino));
          return Fill(out, s.GetXattr(ino, name));
        });
  }

  static void ListXattr(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kListXattr>(
        c.payload, c.reply,
        [&](auto& out, auto ino) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Visible(m, c, ino));
          return Fill(out, s.ListXattr(ino));
        });
  }

  static void RemoveXattr(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kRemoveXattr>(
        c.payload, c.reply,
        [&](auto&, auto ino, auto& name) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.RemoveXattr(ino, name);
        });
  }

  static void AllocateVersions(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kAllocateVersions>(
        c.payload, c.reply, [&](auto& out, auto count) {
          return Fill(out, s.AllocateVersions(count));
        });
  }

  static void GetStripes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kGetStripes>(
        c.payload, c.reply,
        [&](auto& out, auto ino, auto first, auto count) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return Fill(out, s.GetStripes(ino, first, count));
        });
  }

  static void CommitStripe(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kCommitStripe>(
        c.payload, c.reply,
        [&](auto& out, auto ino, auto& sv, auto expected,
            auto min_size) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.CommitStripe(ino, sv, expected, min_size, &std::get<0>(out));
        });
  }

  static void CommitStripes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kCommitStripes>(
        c.payload, c.reply,
        [&](auto& out, auto ino, auto& commits, auto min_size) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.CommitStripes(ino, commits, min_size, &std::get<0>(out));
        });
  }

  static void CommitStripesKeepTimes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kCommitStripesKeepTimes>(
        c.payload, c.reply,
        [&](auto& out, auto ino, auto& commits, auto min_size) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.CommitStripesKeepTimes(ino, commits, min_size,
                                          &std::get<0>(out));
        });
  }

  static void SetStripeMissing(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kSetStripeMissing>(
        c.payload, c.reply,
        [&](auto&, auto ino, auto stripe, auto version, auto mask) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.SetStripeMissing(ino, stripe, version, mask);
        });
  }

  static void DropStripes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kDropStripes>(
        c.payload, c.reply,
        [&](auto& out, auto ino, auto first, auto count) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.DropStripes(ino, first, count, &std::get<0>(out));
        });
  }

  static void DropStripesKeepTimes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kDropStripesKeepTimes>(
        c.payload, c.reply,
        [&](auto& out, auto ino, auto first, auto count) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          return s.DropStripesKeepTimes(ino, first, count, &std::get<0>(out));
        });
  }

  static void ListStripes(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kListStripes>(
        c.payload, c.reply, [&](auto& out, auto ai, auto as, auto limit) {
          return Fill(out, s.ListStripes(ai, as, limit));
        });
  }

  static void ClientHeartbeat(MetaServiceServer& m, const RpcCall& c) {
    if (!m.clients_) return NotServed(c, MsgType::kClientHeartbeat);

    ServeTyped<MsgType::kClientHeartbeat>(
        c.payload, c.reply,
        [&](auto&, const ClientRecord& r) { return m.clients_->Heartbeat(r); });
  }

  static void ListClients(MetaServiceServer& m, const RpcCall& c) {
    if (!m.clients_) return NotServed(c, MsgType::kListClients);

    ServeTyped<MsgType::kListClients>(c.payload, c.reply, [&](auto& out) {
      std::get<0>(out) = m.clients_->List();
      return Status::Ok();
    });
  }

  static void AuthAdd(MetaServiceServer& m, const RpcCall& c) {
    if (!m.identities_) return NotServed(c, MsgType::kAuthAdd);
    ServeTyped<MsgType::kAuthAdd>(
        c.payload, c.reply, [&](auto& out, const IdentityRecord& r) -> Status {
          STRIPEFS_ASSIGN_OR_RETURN(ClusterKey k,
                                    m.server_key_->NewIdentity(r.entity));
          STRIPEFS_RETURN_IF_ERROR(m.identities_->Add(r, k.salt()));
          // Wrapped under the caller's own key: only it can open it.
          ClusterKey caller = c.caller.principal == Principal::kServer
                                  ? *m.server_key_
                                  : m.server_key_->DeriveIdentity(
                                        c.caller.entity, c.caller.salt);
          std::get<0>(out).assign(k.salt().begin(), k.salt().end());
          std::get<1>(out) = k.WrapFor(caller);
          return Status::Ok();
        });
  }

  static void AuthList(MetaServiceServer& m, const RpcCall& c) {
    if (!m.identities_) return NotServed(c, MsgType::kAuthList);
    ServeTyped<MsgType::kAuthList>(c.payload, c.reply, [&](auto& out) {
      std::get<0>(out) = m.identities_->List();
      return Status::Ok();
    });
  }

  static void AuthRemove(MetaServiceServer& m, const RpcCall& c) {
    if (!m.identities_) return NotServed(c, MsgType::kAuthRemove);
    ServeTyped<MsgType::kAuthRemove>(
        c.payload, c.reply, [&](auto&, const std::string& entity) {
          EntitySalt salt{};
          STRIPEFS_RETURN_IF_ERROR(m.identities_->Remove(entity, &salt));
          m.subtree_.Forget(entity);
          if (m.on_removed_) m.on_removed_(entity, salt);
          return Status::Ok();
        });
  }

  // A grant of `ops` on the chunks of `ino` to the caller (chunk_grant.h).
  static void GrantChunks(MetaServiceServer& m, const RpcCall& c) {
    if (!m.grant_key_) {
      c.reply->payload = EncodeErrorResponse(Status::NotSupported(
          "metad does not serve GrantChunks (no grant key)"));
      return;
    }
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kGrantChunks>(
        c.payload, c.reply, [&](auto& out, auto ino, auto ops) -> Status {
          if (ops == 0 || (ops & ~uint32_t{kGrantAllOps}) != 0)
            return Status::InvalidArgument("chunk grant ops " +
                                           std::to_string(ops) +
                                           ": 1 read, 2 write, 3 both");
          if ((ops & kGrantWrite) && c.caller.principal == Principal::kClient &&
              m.identities_) {
            std::optional<IdentityRecord> r = m.identities_->Find(c.caller);
            if (!r || r->read_only)
              return Status(EROFS, c.caller.entity +
                                       " is a read-only identity: it gets "
                                       "read grants only");
          }
          STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
          auto attr = s.GetAttr(ino);
          if (!attr.ok()) return attr.status();
          ChunkGrant g;
          g.ops = static_cast<uint8_t>(ops);
          g.inode = ino;
          g.issued_ms = m.grant_now_ms_();
          g.expires_ms = g.issued_ms + m.grant_lifetime_ms_;
          m.grant_key_->Sign(&g, c.caller);
          const EncodedGrant bytes = EncodeGrant(g);
          std::get<0>(out).assign(bytes.begin(), bytes.end());
          std::get<1>(out) = m.grant_lifetime_ms_;
          return Status::Ok();
        });
  }

  // A read-only client sends only rows that do not mutate.
  static Status Limits(const MetaServiceServer& m, const Caller& caller,
                       const RpcRow<MetaServiceServer>& row) {
    if (caller.principal != Principal::kClient || !row.mutates ||
        !m.identities_)
      return Status::Ok();
    std::optional<IdentityRecord> r = m.identities_->Find(caller);
    if (r && !r->read_only) return Status::Ok();
    return Status(EROFS, caller.entity + " is a read-only identity (" +
                             MsgTypeName(static_cast<uint16_t>(row.type)) +
                             " changes the volume)");
  }
};

namespace {

constexpr bool kMutates = true, kReads = false;

// clang-format off
constexpr RpcRow<MetaServiceServer> kMetaRows[] = {
  {MsgType::kGetGeometry, MetaServiceServer::Rows::GetGeometry, kReads, kAnyone},
  {MsgType::kGetClusterMap, MetaServiceServer::Rows::GetClusterMap, kReads, kAnyone},
  {MsgType::kUpsertServer, MetaServiceServer::Rows::UpsertServer, kMutates, kOperators},
  {MsgType::kSetServerState, MetaServiceServer::Rows::SetServerState, kMutates, kOperators},
  {MsgType::kLookup, MetaServiceServer::Rows::Lookup, kReads, kAnyone},
  {MsgType::kGetAttr, MetaServiceServer::Rows::GetAttr, kReads, kAnyone},
  {MsgType::kSetAttr, MetaServiceServer::Rows::SetAttr, kMutates, kAnyone},
  {MsgType::kMkNode, MetaServiceServer::Rows::MkNode, kMutates, kAnyone},
  {MsgType::kMkdir, MetaServiceServer::Rows::Mkdir, kMutates, kAnyone},
  {MsgType::kSymlink, MetaServiceServer::Rows::Symlink, kMutates, kAnyone},
  {MsgType::kReadLink, MetaServiceServer::Rows::ReadLink, kReads, kAnyone},
  {MsgType::kLink, MetaServiceServer::Rows::Link, kMutates, kAnyone},
  {MsgType::kUnlink, MetaServiceServer::Rows::Unlink, kMutates, kAnyone},
  {MsgType::kCreateEntry, MetaServiceServer::Rows::CreateEntry, kMutates, kAnyone},
  {MsgType::kUnlinkEntry, MetaServiceServer::Rows::UnlinkEntry, kMutates, kAnyone},
  {MsgType::kRmdir, MetaServiceServer::Rows::Rmdir, kMutates, kAnyone},
  {MsgType::kRename, MetaServiceServer::Rows::Rename, kMutates, kAnyone},
  {MsgType::kReadDir, MetaServiceServer::Rows::ReadDir, kReads, kAnyone},
  {MsgType::kPurgeInode, MetaServiceServer::Rows::PurgeInode, kMutates, kAnyone},
  {MsgType::kPurgeInodes, MetaServiceServer::Rows::PurgeInodes, kMutates, kAnyone},
  {MsgType::kListOrphanStripes, MetaServiceServer::Rows::ListOrphanStripes, kReads, kAnyone},
  {MsgType::kSyncMetadata, MetaServiceServer::Rows::SyncMetadata, kReads, kAnyone},
  {MsgType::kListOrphans, MetaServiceServer::Rows::ListOrphans, kReads, kAnyone},
  {MsgType::kStatFs, MetaServiceServer::Rows::StatFs, kReads, kAnyone},
  {MsgType::kSetXattr, MetaServiceServer::Rows::SetXattr, kMutates, kAnyone},
  {MsgType::kGetXattr, MetaServiceServer::Rows::GetXattr, kReads, kAnyone},
  {MsgType::kListXattr, MetaServiceServer::Rows::ListXattr, kReads, kAnyone},
  {MsgType::kRemoveXattr, MetaServiceServer::Rows::RemoveXattr, kMutates, kAnyone},
  {MsgType::kAllocateVersions, MetaServiceServer::Rows::AllocateVersions, kMutates, kAnyone},
  {MsgType::kGetStripes, MetaServiceServer::Rows::GetStripes, kReads, kAnyone},
  {MsgType::kCommitStripe, MetaServiceServer::Rows::CommitStripe, kMutates, kAnyone},
  {MsgType::kCommitStripes, MetaServiceServer::Rows::CommitStripes, kMutates, kAnyone},
  {MsgType::kCommitStripesKeepTimes, MetaServiceServer::Rows::CommitStripesKeepTimes, kMutates, kAnyone},
  {MsgType::kSetStripeMissing, MetaServiceServer::Rows::SetStripeMissing, kMutates, kAnyone},
  {MsgType::kDropStripes, MetaServiceServer::Rows::DropStripes, kMutates, kAnyone},
  {MsgType::kDropStripesKeepTimes, MetaServiceServer::Rows::DropStripesKeepTimes, kMutates, kAnyone},
  {MsgType::kListStripes, MetaServiceServer::Rows::ListStripes, kReads, kOperators},
  {MsgType::kClientHeartbeat, MetaServiceServer::Rows::ClientHeartbeat, kReads, kAnyone},
  {MsgType::kListClients, MetaServiceServer::Rows::ListClients, kReads, kOperators},
  {MsgType::kAuthAdd, MetaServiceServer::Rows::AuthAdd, kMutates, kOperators},
  {MsgType::kAuthList, MetaServiceServer::Rows::AuthList, kReads, kOperators},
  {MsgType::kAuthRemove, MetaServiceServer::Rows::AuthRemove, kMutates, kOperators},
  // Not kMutates: a read-only client gets read grants (the handler refuses
  // it write grants).
  {MsgType::kGrantChunks, MetaServiceServer::Rows::GrantChunks, kReads, kAnyone},
};
// clang-format on
static_assert(RowsUnique(kMetaRows));

}  // namespace

std::optional<SubtreeGuard::Limit> MetaServiceServer::LimitOf(
    const Caller& caller) {
  if (caller.principal != Principal::kClient || !identities_) return {};
  std::optional<IdentityRecord> r = identities_->Find(caller);
  if (!r || r->path == "/" || r->path.empty()) return {};
  return SubtreeGuard::Limit(&subtree_, r->entity, r->path);
}

void MetaServiceServer::Handle(const Caller& caller, uint16_t type,
                               std::span<const uint8_t> payload,
                               AlignedBytes& bulk, RpcReply* reply) {
  Dispatch(kMetaRows, *this, "metad", "wrong address: is this a chunkd?",
           RpcCall{caller, payload, bulk, reply}, type, Rows::Limits);
}

}  // namespace stripefs::rpc

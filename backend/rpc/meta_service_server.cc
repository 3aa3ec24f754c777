#include "backend/rpc/meta_service_server.h"

#include <sys/stat.h>

#include <string>
#include <tuple>
#include <utility>

#include "backend/rpc/dispatch_table.h"
#include "backend/rpc/typed_call.h"

namespace stripefs::rpc {
namespace {

// Adapts a Result<X> service call to ServeTyped's (out, Status) form.
template <typename Tuple, typename R>
Status Fill(Tuple& out, R&& r) {
  if (!r.ok()) return r.status();
  std::get<0>(out) = std::move(r).value();
  return Status::Ok();
}

}  // namespace

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
          STRIPEFS_RETURN_IF_ERROR(
              Within(m, c, [&](auto& l) { return l.Looked(parent, name, r); }));
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
          return Fill(
              out, Created(m, c, s.MkNode(parent, name, mode, uid, gid, rdev)));
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
    ServeTyped<MsgType::kReadLink>(c.payload, c.reply,
                                   [&](auto& out, auto ino) -> Status {
                                     STRIPEFS_RETURN_IF_ERROR(Node(m, c, ino));
                                     return Fill(out, s.ReadLink(ino));
                                   });
  }

  static void Link(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kLink>(c.payload, c.reply,
                               [&](auto& out, auto ino, auto np, auto& nn) {
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
    ServeTyped<MsgType::kRmdir>(c.payload, c.reply,
                                [&](auto&, auto parent, auto& name) -> Status {
                                  STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
                                  return s.Rmdir(parent, name);
                                });
  }

  static void Rename(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kRename>(c.payload, c.reply,
                                 [&](auto& out, auto parent, auto& name,
                                     auto np, auto& nn, auto flags) -> Status {
                                   // Both directories: nothing moves into or
                                   // out of the subtree.
                                   STRIPEFS_RETURN_IF_ERROR(Dir(m, c, parent));
                                   STRIPEFS_RETURN_IF_ERROR(Dir(m, c, np));
                                   return s.Rename(parent, name, np, nn, flags,
                                                   &std::get<0>(out));
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
            std::erase_if(*r,
                          [&](uint64_t ino) { return !Node(m, c, ino).ok(); });
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
        c.payload, c.reply, [&](auto& out, auto ino) -> Status {
          STRIPEFS_RETURN_IF_ERROR(Visible(m, c, ino));
          return Fill(out, s.ListXattr(ino));
        });
  }

  static void RemoveXattr(MetaServiceServer& m, const RpcCall& c) {
    MetaService& s = *m.service_;
    ServeTyped<MsgType::kRemoveXattr>(
        c.payload, c.reply, [&](auto&, auto ino, auto& name) -> Status {
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

// MetaServiceServer: the RpcHandler that serves any MetaService (metad); its
// clients are RemoteMetaService stubs (remote_meta_service.h).
//
// Requests go through a dispatch table (meta_service_server.cc, one row per
// message: handler, whether it mutates, who may send it); read-only
// identities are held to the reading rows, --path clients to their subtree
// (subtree_guard.h), and GrantChunks signs chunk grants (chunk_grant.h).
//
// Ownership: does not own the service, the ClientTable or the
// IdentityTable. Thread-safety: safe from many threads; everything set by
// ServeIdentities / OnIdentityRemoved / ServeGrants is read-only once
// serving starts, and the collaborators (SubtreeGuard, ClientTable,
// IdentityTable) lock for themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "backend/meta/meta_service.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/client_table.h"
#include "backend/rpc/identity_table.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/subtree_guard.h"

namespace stripefs::rpc {

class MetaServiceServer final : public RpcHandler {
 public:
  // `clients` (optional, not owned): serves ClientHeartbeat / ListClients.
  explicit MetaServiceServer(MetaService* service,
                             ClientTable* clients = nullptr)
      : service_(service), clients_(clients), subtree_(service) {}
  std::string Role() const override { return "metad"; }
  // Serves AuthAdd/AuthList/AuthRemove from `table` (not owned; also the
  // server's IdentityGate), holds read-only clients to reading and clients
  // given --path to their subtree (subtree_guard.h); `server_key` derives
  // and wraps the keys of new identities. Call before the server starts.
  void ServeIdentities(IdentityTable* table,
                       std::shared_ptr<const ClusterKey> server_key) {
    identities_ = table;
    server_key_ = std::move(server_key);
  }
  // Called (on a server thread) with the name of each identity AuthRemove
  // removed, after the table has dropped it: metad closes its open
  // sessions there (RpcServer::CloseSessionsOf). Call before the first
  // AuthRemove can arrive; the function must be thread-safe.
  // The salt is the removed identity's (its chunk grants name it).
  using RemovedFn =
      std::function<void(const std::string& entity, const EntitySalt& salt)>;
  void OnIdentityRemoved(RemovedFn f) { on_removed_ = std::move(f); }
  // Serves GrantChunks (chunk_grant.h): grants signed with `key` for
  // `lifetime_ms`, timed by `now_ms` (tests inject a clock). A read-only
  // client gets read grants only (EROFS for write), a --path client grants
  // of files it reached in its subtree only (EACCES). Without it metad
  // answers GrantChunks with EOPNOTSUPP. Call before the server starts.
  void ServeGrants(GrantKey key, std::function<uint64_t()> now_ms = UnixMillis,
                   uint32_t lifetime_ms = kGrantLifetimeMs) {
    grant_key_.emplace(std::move(key));
    grant_now_ms_ = std::move(now_ms);
    grant_lifetime_ms_ = lifetime_ms;
  }
  // Serves one request through the dispatch table (the .cc): one row per
  // message with its handler, whether it mutates and who may send it.
  void Handle(const Caller& caller, uint16_t type,
              std::span<const uint8_t> payload, AlignedBytes& bulk,
              RpcReply* reply) override;
  struct Rows;  // the table's handlers

 private:
  MetaService* service_;
  ClientTable* clients_;
  // The subtree checks of `caller`, if it is a client limited by --path.
  std::optional<SubtreeGuard::Limit> LimitOf(const Caller& caller);

  IdentityTable* identities_ = nullptr;
  std::shared_ptr<const ClusterKey> server_key_;
  SubtreeGuard subtree_;
  RemovedFn on_removed_;
  std::optional<GrantKey> grant_key_;
  std::function<uint64_t()> grant_now_ms_;
  uint32_t grant_lifetime_ms_ = kGrantLifetimeMs;
};

}  // namespace stripefs::rpc

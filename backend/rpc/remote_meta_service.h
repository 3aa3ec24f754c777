// RemoteMetaService: MetaService over RPC to a metad at a fixed address
// (the other end is MetaServiceServer, meta_service_server.h).
//
// Every MetaService method is one request/response; errors returned by the
// remote service come back as the same Status (code and message). Transport
// failures are EHOSTDOWN (unreachable, with the address and a hint),
// ETIMEDOUT (no answer within the call timeout) or EACCES (key mismatch).
//
// Ownership: owns its RpcClient (connection pool).
// Thread-safety: safe to use from many threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/meta/meta_service.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/client_table.h"
#include "backend/rpc/identity_table.h"
#include "backend/rpc/rpc_client.h"

namespace stripefs::rpc {

class RemoteMetaService final : public MetaService {
 public:
  // `address` "HOST:PORT" of metad. Never blocks (connects lazily).
  RemoteMetaService(std::string address, std::shared_ptr<const ClusterKey> key,
                    RpcClientOptions options = DefaultOptions());
  static RpcClientOptions DefaultOptions();

  // Round trip without touching the store: role of the peer ("metad").
  Result<std::string> Ping();
  RpcClient& client() { return client_; }
  // metad's ClientTable (client_table.h): announce this client / list them.
  // ENOTSUP from a metad that keeps no table.
  Status ClientHeartbeat(const ClientRecord& record);
  Result<std::vector<ClientRecord>> ListClients();
  // metad's identity table (identity_table.h; admin or server key only,
  // EPERM otherwise). AuthAdd returns the new identity with its key,
  // unwrapped with this client's own key (it crossed the wire wrapped).
  Result<ClusterKey> AuthAdd(const IdentityRecord& record);
  Result<std::vector<IdentityRecord>> AuthList();
  Status AuthRemove(const std::string& entity);
  // A grant of `ops` (chunk_grant.h) on the chunks of `ino` for this
  // client's identity, and its lifetime in ms. metad's refusal as is;
  // EPROTO for a reply that is not a grant of that inode and ops.
  Result<std::pair<EncodedGrant, uint32_t>> GrantChunks(uint64_t ino,
                                                        uint8_t ops);

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
  // An older metad answers EOPNOTSUPP (MetaService's contract).
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
  // A metad without SyncMetadata syncs every mutation: OK.
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
  Status CommitStripes(uint64_t ino, const std::vector<StripeCommit>& commits,
                       uint64_t min_file_size,
                       std::vector<ObsoleteStripe>* obsolete) override;
  Status SetStripeMissing(uint64_t ino, uint64_t stripe, uint64_t version,
                          uint32_t missing_mask) override;
  Status DropStripes(uint64_t ino, uint64_t first, uint64_t count,
                     std::vector<ObsoleteStripe>* obsolete) override;
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
  RpcClient client_;
};

}  // namespace stripefs::rpc

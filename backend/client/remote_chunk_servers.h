// RemoteChunkServers: the ChunkServerSet of a networked cluster. Creates one
// RemoteChunkService per chunk server on first use, from the address in the
// cluster map, and replaces it when a server re-registers elsewhere.
//
// Ownership: owns the stubs; the cluster key is shared.
// Thread-safety: Get() is safe from many threads (one mutex around the map;
// the stubs themselves are thread-safe and never destroyed while the set
// lives, so returned pointers stay valid).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/client/chunk_server_set.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_chunk_service.h"

namespace stripefs {

class RemoteChunkServers : public ChunkServerSet {
 public:
  // `read_timeout` > 0: deadline of each chunk read RPC (see
  // RemoteChunkService); zero keeps the 10 s call timeout. `volume`: the
  // volume metad serves (its handshake); each chunkd must serve it too.
  // `grants`: where a client identity's stubs get chunk grants (owned;
  // null for the server and admin identities, which need none).
  explicit RemoteChunkServers(
      std::shared_ptr<const rpc::ClusterKey> key,
      std::chrono::milliseconds read_timeout = {}, rpc::VolumeId volume = {},
      std::unique_ptr<rpc::ChunkGrantSource> grants = nullptr)
      : key_(std::move(key)),
        read_timeout_(read_timeout),
        volume_(volume),
        grants_(std::move(grants)) {}
  ChunkService* Get(const ServerInfo& info) override;

 private:
  std::shared_ptr<const rpc::ClusterKey> key_;
  const std::chrono::milliseconds read_timeout_;
  const rpc::VolumeId volume_;
  const std::unique_ptr<rpc::ChunkGrantSource> grants_;
  std::mutex mu_;
  struct Entry {
    std::string address;
    rpc::RemoteChunkService* stub = nullptr;
  };
  std::map<uint32_t, Entry> current_;  // guarded by mu_
  // Every stub ever made (an old address's stub may still be in use).
  std::vector<std::unique_ptr<rpc::RemoteChunkService>> stubs_;
};

}  // namespace stripefs

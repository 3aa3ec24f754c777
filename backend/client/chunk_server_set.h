// ChunkServerSet: resolves a chunk server id (from the cluster map) to the
// ChunkService that reaches it. LocalChunkServers holds in-process stores
// (embedded volumes, tests); the RPC layer provides the remote variant.
//
// Thread-safety: Get() may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/meta/meta_types.h"

namespace stripefs {

class ChunkServerSet {
 public:
  virtual ~ChunkServerSet() = default;
  // The service for server `id`, or null when it is unknown. `info` is the
  // server's entry in the current cluster map (its address).
  virtual ChunkService* Get(const ServerInfo& info) = 0;
};

// Server id i is services[i]; the set owns them.
class LocalChunkServers : public ChunkServerSet {
 public:
  explicit LocalChunkServers(
      std::vector<std::unique_ptr<ChunkService>> services)
      : services_(std::move(services)) {}
  ChunkService* Get(const ServerInfo& info) override {
    return info.id < services_.size() ? services_[info.id].get() : nullptr;
  }
  size_t size() const { return services_.size(); }
  ChunkService* at(size_t i) { return services_[i].get(); }

 private:
  std::vector<std::unique_ptr<ChunkService>> services_;
};

}  // namespace stripefs

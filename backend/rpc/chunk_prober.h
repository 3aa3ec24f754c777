// ChunkProber: the ServerProber metad's HealthMonitor uses — a Ping RPC to
// the chunkd at the address in the cluster map, with the probe's deadline
// as both connect and call timeout. Ping is answered by the RPC server
// itself (no store access), so a probe is cheap; a stopped (SIGSTOP) or
// wedged server misses it by timing out, a dead one by connection refused.
// A timed-out connection is closed, never reused.
//
// Ownership: owns one RemoteChunkService per (server id, address); a stub
// for an old address is dropped when the server re-registers elsewhere.
// Thread-safety: Probe() may be called concurrently (the monitor probes
// every server in parallel).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "backend/meta/server_prober.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_chunk_service.h"
#include "common/thread_annotations.h"

namespace stripefs {

class ChunkProber final : public ServerProber {
 public:
  // `volume`: metad's volume, which every chunkd probed must serve.
  explicit ChunkProber(std::shared_ptr<const rpc::ClusterKey> key,
                       rpc::VolumeId volume = {})
      : key_(std::move(key)), volume_(volume) {}
  Status Probe(const ServerInfo& info,
               std::chrono::milliseconds timeout) override
      STRIPEFS_EXCLUDES(mu_);

 private:
  std::shared_ptr<const rpc::ClusterKey> key_;
  const rpc::VolumeId volume_;
  Mutex mu_;
  struct Stub {
    std::string address;
    std::chrono::milliseconds timeout{0};
    std::shared_ptr<rpc::RemoteChunkService> service;
  };
  std::map<uint32_t, Stub> stubs_ STRIPEFS_GUARDED_BY(mu_);
};

}  // namespace stripefs

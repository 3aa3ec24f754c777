// Volume: an open stripefs volume — its metadata service, its chunk servers
// and the stripe client over them — in one of two modes:
//  * embedded: a local directory holding the metadata RocksDB (meta/) and
//    k+m chunk stores (chunks/NN/), all in process, through the same
//    interfaces the network path uses;
//  * cluster: a remote metadata service plus remote chunk servers (see
//    backend/rpc).
//
// Ownership: the Volume owns everything it opened; meta() and client() stay
// valid for its lifetime. Thread-safety: meta() and client() are
// thread-safe; opening and closing are not.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "backend/chunk/chunk_store.h"
#include "backend/client/chunk_server_set.h"
#include "backend/client/holding_meta_service.h"
#include "backend/client/stripe_client.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"

namespace stripefs {

namespace rpc {
class RemoteMetaService;
}

struct EmbeddedVolumeOptions {
  Geometry geometry;  // used when the volume is created
  bool create_if_missing = true;
  uint32_t root_uid = 0;  // owner of a new volume's root directory
  uint32_t root_gid = 0;
  // ENOSPC margin of each chunk store (ChunkStoreOptions::reserve_bytes).
  uint64_t chunk_reserve_bytes = kScaledReserve;
  bool sync_metadata = true;  // sync the metadata WAL on every mutation
  // > 0: namespace changes acknowledged before their WAL sync and synced
  // within this delay (MetaStoreOptions::namespace_sync_delay; 0: each
  // synced before it returns).
  std::chrono::milliseconds namespace_sync_delay{0};
  StripeClientOptions client;
};

class Volume {
 public:
  // Opens the embedded volume in `dir`, creating it (with
  // options.geometry) if `dir` is empty or absent. A geometry that differs
  // from an existing volume's is EINVAL.
  static Result<std::unique_ptr<Volume>> OpenEmbedded(
      const std::string& dir, const EmbeddedVolumeOptions& options = {});

  // Connects to a cluster: metad at `meta_address` ("HOST:PORT"), chunk
  // servers as its cluster map names them, authenticated with the 32-byte
  // key in `key_file`. Fails with a message naming the address or key file
  // and the fix when metad is unreachable or the key is wrong. With `hold`,
  // metadata calls after that wait out a metad outage (HoldingMetaService)
  // instead of failing at once.
  static Result<std::unique_ptr<Volume>> ConnectCluster(
      const std::string& meta_address, const std::string& key_file,
      const StripeClientOptions& options = {},
      const MetaHoldOptions* hold = nullptr);

  // Assembles a volume from services opened elsewhere (cluster mode, tests).
  static Result<std::unique_ptr<Volume>> FromParts(
      std::unique_ptr<MetaService> meta,
      std::unique_ptr<ChunkServerSet> servers,
      const StripeClientOptions& options = {});

  ~Volume();

  MetaService& meta() { return *meta_; }
  StripeClient& client() { return *client_; }
  ChunkServerSet& servers() { return *servers_; }
  const Geometry& geometry() const { return client_->geometry(); }
  // The metad outage holder under meta() (ConnectCluster with `hold`), or
  // null: its held/expired counters for `stripefs stat`.
  const HoldingMetaService* holding_meta() const { return holding_; }
  // Connections to metad that went to another metad of the --meta list than
  // the last one that answered (0 for an embedded volume).
  uint64_t meta_failovers() const;
  // "embedded:<dir>" or "cluster:<meta address>"; a mount's source in
  // /proc/mounts.
  const std::string& description() const { return description_; }
  static std::string EmbeddedDescription(const std::string& dir) {
    return "embedded:" + dir;
  }

 private:
  Volume() = default;
  std::unique_ptr<MetaService> meta_;
  std::unique_ptr<ChunkServerSet> servers_;
  std::unique_ptr<StripeClient> client_;  // destroyed first
  std::string description_;
  HoldingMetaService* holding_ = nullptr;          // inside meta_, when holding
  rpc::RemoteMetaService* remote_meta_ = nullptr;  // inside meta_ (cluster)
};

}  // namespace stripefs

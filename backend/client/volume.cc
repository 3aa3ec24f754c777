#include "backend/client/volume.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "backend/chunk/chunk_store.h"
#include "backend/client/holding_meta_service.h"
#include "backend/client/remote_chunk_servers.h"
#include "backend/meta/meta_store.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_meta_service.h"
#include "common/durable_dirs.h"

namespace stripefs {

namespace fs = std::filesystem;

Volume::~Volume() {
  client_.reset();  // stops I/O threads before the services go away
  servers_.reset();
  meta_.reset();
}

Result<std::unique_ptr<Volume>> Volume::FromParts(
    std::unique_ptr<MetaService> meta, std::unique_ptr<ChunkServerSet> servers,
    const StripeClientOptions& options) {
  std::unique_ptr<Volume> v(new Volume());
  v->meta_ = std::move(meta);
  v->servers_ = std::move(servers);
  auto client =
      StripeClient::Create(v->meta_.get(), v->servers_.get(), options);
  if (!client.ok()) return client.status();
  v->client_ = std::move(client).value();
  return v;
}

Result<std::unique_ptr<Volume>> Volume::OpenEmbedded(
    const std::string& dir, const EmbeddedVolumeOptions& options) {
  std::error_code ec;
  const fs::path root(dir);
  const fs::path meta_dir = root / "meta";
  const bool exists = MetaStore::Exists(meta_dir.string());
  if (!exists) {
    if (!options.create_if_missing) {
      return Status::NotFound(dir +
                              " holds no stripefs volume (run `stripefs "
                              "mkfs " +
                              dir +
                              "` or mount without "
                              "--no-create)");
    }
    if (fs::exists(root, ec) && !fs::is_directory(root, ec)) {
      return Status(ENOTDIR, dir + " is not a directory");
    }
    if (fs::exists(root, ec) && !fs::is_empty(root, ec)) {
      return Status(ENOTEMPTY, dir +
                                   " is not empty and holds no stripefs "
                                   "volume: pick an empty directory");
    }
    // Durably: a power cut soon after must not lose the new volume (its
    // stores sync only what is inside their own directories).
    STRIPEFS_RETURN_IF_ERROR(MakeDirsDurably(dir, "volume directory"));
  }

  MetaStoreOptions mo;
  mo.root_uid = options.root_uid;
  mo.root_gid = options.root_gid;
  mo.sync = options.sync_metadata;
  mo.namespace_sync_delay = options.namespace_sync_delay;
  auto meta = exists
                  ? MetaStore::Open(meta_dir.string(), mo)
                  : MetaStore::Create(meta_dir.string(), options.geometry, mo);
  if (!meta.ok())
    return meta.status().Annotate("metadata store " + meta_dir.string());
  auto geometry = (*meta)->GetGeometry();
  if (!geometry.ok()) return geometry.status();
  const uint32_t n = geometry->k + geometry->m;

  // One chunk store per chunk index: the embedded "servers" 0..n-1.
  std::vector<std::unique_ptr<ChunkService>> stores;
  ChunkStoreOptions co;
  co.reserve_bytes = options.chunk_reserve_bytes;
  for (uint32_t i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "%02u", i);
    const fs::path d = root / "chunks" / name;
    STRIPEFS_RETURN_IF_ERROR(
        MakeDirsDurably(d.string(), "chunk store directory"));
    auto store = ChunkStore::Open(d.string(), co);
    if (!store.ok())
      return store.status().Annotate("chunk store " + d.string());
    stores.push_back(std::move(store).value());
  }

  // The cluster map names the local stores (first open of a new volume).
  auto map = (*meta)->GetClusterMap();
  if (!map.ok()) return map.status();
  for (uint32_t i = 0; i < n; ++i) {
    bool known = false;
    for (const auto& s : map->servers) known |= s.id == i;
    if (known) continue;
    ServerInfo info;
    info.id = i;
    info.address = "";
    info.failure_domain = "disk" + std::to_string(i);
    info.state = ServerState::kUp;
    STRIPEFS_RETURN_IF_ERROR((*meta)->UpsertServer(info));
  }

  auto volume = FromParts(
      std::move(meta).value(),
      std::make_unique<LocalChunkServers>(std::move(stores)), options.client);
  if (!volume.ok()) return volume.status();
  (*volume)->description_ = EmbeddedDescription(dir);
  return volume;
}

uint64_t Volume::meta_failovers() const {
  return remote_meta_ ? remote_meta_->client().failovers() : 0;
}

Result<std::unique_ptr<Volume>> Volume::ConnectCluster(
    const std::string& meta_address, const std::string& key_file,
    const StripeClientOptions& options, const MetaHoldOptions* hold) {
  auto key = rpc::ClusterKey::Load(key_file);
  if (!key.ok()) return key.status();
  if (options.secure_wire) *key = (*key)->WithSecureWire(true);
  auto meta = std::make_unique<rpc::RemoteMetaService>(meta_address, *key);
  auto role = meta->Ping();
  if (!role.ok()) {
    return role.status().Annotate(
        "cannot reach the metadata service at " + meta_address +
        " (is `stripefs metad` running there, and is " + key_file +
        " the cluster's key?)");
  }
  rpc::RemoteMetaService* remote = meta.get();
  // metad's handshake named its volume; every chunkd must serve the same.
  const rpc::VolumeId volume_id = meta->client().volume();
  std::unique_ptr<MetaService> service = std::move(meta);
  HoldingMetaService* holding = nullptr;
  if (hold) {
    auto h = std::make_unique<HoldingMetaService>(std::move(service), *hold);
    holding = h.get();
    service = std::move(h);
  }
  // A client identity shows chunkd metad's grants for the files it
  // touches (docs/cluster.md "Chunk grants"); the others need none.
  std::unique_ptr<rpc::ChunkGrantSource> grants;
  if ((*key)->principal() == rpc::Principal::kClient) {
    MetaHoldOptions held;  // no hold: outages fail at once
    held.hold = std::chrono::milliseconds(0);
    if (hold) held = *hold;
    grants = std::make_unique<rpc::ChunkGrantCache>(
        [remote, held](
            uint64_t ino,
            uint8_t ops) -> Result<std::pair<rpc::EncodedGrant, uint32_t>> {
          // A metad outage is waited out as the namespace calls wait
          // (HoldingMetaService), then EIO: never reported as the chunk
          // server's transport error.
          const auto give_up = std::chrono::steady_clock::now() + held.hold;
          auto backoff = held.first_backoff;
          for (;;) {
            auto r = remote->GrantChunks(ino, ops);
            if (r.ok() || !HoldingMetaService::IsOutage(r.status())) return r;
            if (std::chrono::steady_clock::now() + backoff > give_up)
              return Status(EIO, "metad unreachable for a chunk grant: " +
                                     r.status().ToString());
            std::this_thread::sleep_for(backoff);
            backoff = std::min(2 * backoff, held.max_backoff);
          }
        });
  }
  auto volume = FromParts(
      std::move(service),
      std::make_unique<RemoteChunkServers>(*key, options.chunk_read_timeout,
                                           volume_id, std::move(grants)),
      options);
  if (!volume.ok()) return volume.status();
  (*volume)->description_ = "cluster:" + meta_address;
  (*volume)->holding_ = holding;
  (*volume)->remote_meta_ = remote;
  return volume;
}

}  // namespace stripefs

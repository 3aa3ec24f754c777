#include "tests/support/in_process_volume.h"

#include <stdlib.h>

#include <filesystem>

#include "backend/meta/meta_store.h"
#include "tests/support/fault_injecting_chunk_service.h"

namespace stripefs::testing {

Result<std::unique_ptr<InProcessVolume>> InProcessVolume::Open(
    InProcessVolumeOptions o) {
  std::unique_ptr<InProcessVolume> v(new InProcessVolume());
  char tmpl[] = "/tmp/stripefs-volume-XXXXXX";
  if (!::mkdtemp(tmpl)) return Status::FromErrno(errno, "mkdtemp");
  v->dir_ = tmpl;
  STRIPEFS_ASSIGN_OR_RETURN(
      std::unique_ptr<MetaStore> meta,
      MetaStore::Create(v->dir_ + "/meta", o.geometry, o.meta));
  std::vector<std::unique_ptr<ChunkService>> wrappers;
  for (int i = 0; i < o.servers; ++i) {
    ChunkStoreOptions co;
    co.reserve_bytes = 0;
    STRIPEFS_ASSIGN_OR_RETURN(
        std::unique_ptr<ChunkStore> store,
        ChunkStore::Open(v->dir_ + "/chunks" + std::to_string(i), co));
    std::unique_ptr<ChunkService> w =
        o.wrap_chunks
            ? o.wrap_chunks(store.get())
            : std::make_unique<FaultInjectingChunkService>(store.get());
    v->services_.push_back(w.get());
    wrappers.push_back(std::move(w));
    v->stores_.push_back(std::move(store));
    ServerInfo info;
    info.id = static_cast<uint32_t>(i);
    info.failure_domain = "host" + std::to_string(i);
    STRIPEFS_RETURN_IF_ERROR(meta->UpsertServer(info));
  }
  std::unique_ptr<MetaService> ms = std::move(meta);
  if (o.wrap_meta) ms = o.wrap_meta(std::move(ms));
  STRIPEFS_ASSIGN_OR_RETURN(
      v->volume_,
      Volume::FromParts(
          std::move(ms),
          std::make_unique<LocalChunkServers>(std::move(wrappers)), o.client));
  return v;
}

InProcessVolume::~InProcessVolume() {
  volume_.reset();
  stores_.clear();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

uint64_t InProcessVolume::StoredChunks() {
  uint64_t n = 0;
  for (auto& s : stores_) {
    auto st = s->Stats();
    if (st.ok()) n += st->chunks;
  }
  return n;
}

}  // namespace stripefs::testing

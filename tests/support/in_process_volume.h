// InProcessVolume: a Volume with no processes and no network -- a MetaStore
// (unsynced unless InProcessVolumeOptions::meta says otherwise) and
// `servers` ChunkStores in a fresh temporary directory, each store behind a
// wrapper the test chooses (default: a FaultInjectingChunkService, so servers
// can be made "down" or writes fail; tests/health uses a HangingChunkService).
// Server i has id i and failure domain "host<i>". The stripe client, meta
// wrappers and file system tests build their volume with it.
//
// Owns everything; the destructor closes the volume, then the stores, then
// removes the directory (stop anything that uses the volume first, and
// release hung wrappers). Not thread-safe itself; the Volume is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/chunk/chunk_store.h"
#include "backend/client/volume.h"
#include "backend/meta/meta_store.h"
#include "common/status.h"

namespace stripefs::testing {

struct InProcessVolumeOptions {
  int servers = 6;
  Geometry geometry{4, 2, 4096};
  StripeClientOptions client;
  // The service the volume talks to for store `s` (null: a
  // FaultInjectingChunkService over it).
  std::function<std::unique_ptr<ChunkService>(ChunkService* s)> wrap_chunks;
  // The MetaStore's options (default: no WAL sync, the fastest for tests).
  MetaStoreOptions meta = [] {
    MetaStoreOptions m;
    m.sync = false;
    return m;
  }();
  // The meta service over the store (null: the MetaStore itself).
  std::function<std::unique_ptr<MetaService>(std::unique_ptr<MetaService>)>
      wrap_meta;
};

class InProcessVolume {
 public:
  static Result<std::unique_ptr<InProcessVolume>> Open(
      InProcessVolumeOptions o = {});
  ~InProcessVolume();
  InProcessVolume(const InProcessVolume&) = delete;
  InProcessVolume& operator=(const InProcessVolume&) = delete;

  Volume& volume() { return *volume_; }
  const std::string& dir() const { return dir_; }
  size_t servers() const { return stores_.size(); }
  ChunkStore& store(size_t i) { return *stores_[i]; }
  // The wrapper of server i, as the type wrap_chunks made.
  template <typename T = ChunkService>
  T* service(size_t i) {
    return static_cast<T*>(services_[i]);
  }
  // Chunks stored on all servers together.
  uint64_t StoredChunks();
  // Closes the volume early (e.g. to test its destructor); stores stay.
  void CloseVolume() { volume_.reset(); }

 private:
  InProcessVolume() = default;
  std::string dir_;
  std::vector<std::unique_ptr<ChunkStore>> stores_;
  std::vector<ChunkService*> services_;
  std::unique_ptr<Volume> volume_;
};

}  // namespace stripefs::testing

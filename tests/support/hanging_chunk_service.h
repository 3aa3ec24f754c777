// HangingChunkService: a ChunkService that forwards to another one, except
// that client reads (ReadChunk) can be made to hang, as a chunk server that
// is stuck (not dead) looks to its callers. For the read-deadline and the
// RPC timeout tests.
//
//   Hang()          every ReadChunk blocks from now on
//   HangNextRead()  only the next ReadChunk blocks
//   Release()       stops hanging and lets every blocked read go on
//
// A blocked read gives up waiting after 60 s so a broken test cannot hang
// forever. Server-side operations (CloneChunk, PatchChunk,
// PatchChunkRanges) go to the inner service directly: only client reads
// hang. Does not own `inner`, which
// must outlive it. Thread-safe. Header-only, so that stripefs_test_support
// does not pull the chunk store into tests that never use it: users link
// the chunk library themselves.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "backend/chunk/chunk_service.h"

namespace stripefs::testing {

class HangingChunkService : public ChunkService {
 public:
  explicit HangingChunkService(ChunkService* inner) : inner_(inner) {}

  void Hang();
  void HangNextRead();
  void Release();
  // Reads blocked right now.
  int blocked();

  Result<std::vector<uint8_t>> ReadChunk(const ChunkId& id, uint64_t version,
                                         uint32_t offset,
                                         uint32_t length) override;
  Status WriteChunk(const ChunkId& id, uint64_t version,
                    std::span<const uint8_t> data) override {
    return inner_->WriteChunk(id, version, data);
  }
  Status DeleteChunk(const ChunkId& id, uint64_t keep) override {
    return inner_->DeleteChunk(id, keep);
  }
  Status DeleteChunkVersion(const ChunkId& id, uint64_t version) override {
    return inner_->DeleteChunkVersion(id, version);
  }
  Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo& after,
                                            uint32_t limit) override {
    return inner_->ListChunks(after, limit);
  }
  Result<ChunkStoreStats> Stats() override { return inner_->Stats(); }
  Status CloneChunk(const ChunkId& id, uint64_t from, uint64_t to,
                    uint32_t length) override {
    return inner_->CloneChunk(id, from, to, length);
  }
  Status PatchChunk(const ChunkId& id, uint64_t from, uint64_t to,
                    uint32_t length, uint32_t offset,
                    std::span<const uint8_t> bytes) override {
    return inner_->PatchChunk(id, from, to, length, offset, bytes);
  }
  Status PatchChunkRanges(const ChunkId& id, uint64_t from, uint64_t to,
                          uint32_t length, std::span<const PatchRange> ranges,
                          std::span<const uint8_t> bytes) override {
    return inner_->PatchChunkRanges(id, from, to, length, ranges, bytes);
  }

 private:
  ChunkService* inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hang_all_ = false;
  int hang_next_ = 0;
  uint64_t releases_ = 0;  // Release() calls; a blocked read waits for one
  int blocked_ = 0;
};

inline void HangingChunkService::Hang() {
  std::lock_guard<std::mutex> lock(mu_);
  hang_all_ = true;
}

inline void HangingChunkService::HangNextRead() {
  std::lock_guard<std::mutex> lock(mu_);
  hang_next_ = 1;
}

inline void HangingChunkService::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hang_all_ = false;
    hang_next_ = 0;
    ++releases_;
  }
  cv_.notify_all();
}

inline int HangingChunkService::blocked() {
  std::lock_guard<std::mutex> lock(mu_);
  return blocked_;
}

inline Result<std::vector<uint8_t>> HangingChunkService::ReadChunk(
    const ChunkId& id, uint64_t version, uint32_t offset, uint32_t length) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (hang_all_ || hang_next_ > 0) {
      if (hang_next_ > 0) --hang_next_;
      const uint64_t seen = releases_;
      ++blocked_;
      cv_.wait_for(lock, std::chrono::seconds(60),
                   [&] { return releases_ != seen; });
      --blocked_;
    }
  }
  return inner_->ReadChunk(id, version, offset, length);
}

}  // namespace stripefs::testing

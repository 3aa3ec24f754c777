// Test-only: a ChunkService wrapper that can pretend its server is down or
// that writes fail, to exercise degraded paths of the stripe client.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <span>

#include "backend/chunk/chunk_service.h"

namespace stripefs::testing {

class FaultInjectingChunkService : public ChunkService {
 public:
  explicit FaultInjectingChunkService(ChunkService* inner) : inner_(inner) {}

  std::atomic<bool> down{false};
  std::atomic<bool> fail_writes{false};
  std::atomic<int> writes{0};  // WriteChunk calls (patches and clones too)
  std::atomic<int> version_deletes{0};  // DeleteChunkVersion calls
  std::atomic<int> op_batches{0};       // ApplyChunkOps calls
  std::atomic<int> batched_ops{0};      // ops in them
  // Off (the default): ReadChunkIntoBy is NotSupported, so readers take
  // their general path. On: it is forwarded (counted in bounded_reads).
  std::atomic<bool> bounded{false};
  std::atomic<int> bounded_reads{0};  // ReadChunkIntoBy calls forwarded
  // Off (the default): TryReadChunkInto says WouldBlock (as a remote
  // service does). On: it is forwarded (counted in tried_reads).
  std::atomic<bool> try_reads{false};
  std::atomic<int> tried_reads{0};
  std::atomic<int> reads{0};          // ReadChunk calls
  std::atomic<int> range_batches{0};  // ReadChunkRanges calls
  std::atomic<int> batched_reads{0};  // reads in them
  // When set (before the wrapper is used): a write of a chunk for which it
  // returns an error fails with that error (the others go through).
  std::function<Status(const ChunkId&)> write_fault;
  // Run at the start of every ReadChunk / DeleteChunkVersion (set before
  // the wrapper is used).
  std::function<void()> before_read;
  std::function<void()> before_delete;

  Status WriteChunk(const ChunkId& id, uint64_t version,
                    std::span<const uint8_t> data) override {
    if (down) return Status::Unavailable("injected: server down");
    if (fail_writes) return Status::NoSpace("injected: disk full");
    if (write_fault) STRIPEFS_RETURN_IF_ERROR(write_fault(id));
    ++writes;
    return inner_->WriteChunk(id, version, data);
  }
  // Counted, then the default: each op through this wrapper's methods.
  std::vector<Status> ApplyChunkOps(
      std::span<const ChunkWriteOp> ops) override {
    ++op_batches;
    batched_ops += static_cast<int>(ops.size());
    return ChunkService::ApplyChunkOps(ops);
  }
  // Counted, then the default: each read through this wrapper's methods.
  std::vector<Status> ReadChunkRanges(
      std::span<const ChunkRangeRead> reads,
      std::chrono::steady_clock::time_point deadline) override {
    ++range_batches;
    batched_reads += static_cast<int>(reads.size());
    return ChunkService::ReadChunkRanges(reads, deadline);
  }
  Result<std::vector<uint8_t>> ReadChunk(const ChunkId& id, uint64_t version,
                                         uint32_t offset,
                                         uint32_t length) override {
    if (down) return Status::Unavailable("injected: server down");
    if (before_read) before_read();
    ++reads;
    return inner_->ReadChunk(id, version, offset, length);
  }
  Status ReadChunkIntoBy(
      const ChunkId& id, uint64_t version, uint32_t offset,
      std::span<uint8_t> out,
      std::chrono::steady_clock::time_point deadline) override {
    if (!bounded) return Status::NotSupported("bounded ReadChunkInto");
    if (down) return Status::Unavailable("injected: server down");
    ++bounded_reads;
    return inner_->ReadChunkIntoBy(id, version, offset, out, deadline);
  }
  Status TryReadChunkInto(const ChunkId& id, uint64_t version, uint32_t offset,
                          std::span<uint8_t> out) override {
    if (!try_reads) return Status::WouldBlock("try-reads off");
    if (down) return Status::Unavailable("injected: server down");
    ++tried_reads;
    return inner_->TryReadChunkInto(id, version, offset, out);
  }
  Status DeleteChunk(const ChunkId& id, uint64_t keep) override {
    if (down) return Status::Unavailable("injected: server down");
    return inner_->DeleteChunk(id, keep);
  }
  Status DeleteChunkVersion(const ChunkId& id, uint64_t version) override {
    if (down) return Status::Unavailable("injected: server down");
    ++version_deletes;
    if (before_delete) before_delete();
    return inner_->DeleteChunkVersion(id, version);
  }
  Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo& after,
                                            uint32_t limit) override {
    if (down) return Status::Unavailable("injected: server down");
    return inner_->ListChunks(after, limit);
  }
  Result<ChunkStoreStats> Stats() override {
    if (down) return Status::Unavailable("injected: server down");
    return inner_->Stats();
  }

 private:
  ChunkService* inner_;
};

}  // namespace stripefs::testing

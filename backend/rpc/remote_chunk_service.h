// RemoteChunkService: ChunkService over RPC to one chunkd (the other end
// is ChunkServiceServer, chunk_service_server.h).
//
// Chunk bytes travel in the frame's bulk section: WriteChunk sends straight
// from the caller's span (one gather write, no copy), ReadChunk receives
// straight into the vector it returns, ReadChunkInto(By) straight into the
// caller's buffer (a FUSE reply, a cached stripe). Errors of the remote store
// come back as the same Status; transport failures are EHOSTDOWN / ETIMEDOUT /
// EACCES (see rpc_client.h) so the stripe client can treat the chunk as
// missing.
//
// Ownership: owns its RpcClient; borrows the ChunkGrantSource.
// Thread-safety: safe from many threads.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/rpc_client.h"

namespace stripefs::rpc {

class RemoteChunkService final : public ChunkService {
 public:
  // `address` "HOST:PORT" of the chunkd (ServerInfo::address). Never blocks.
  // `read_timeout` > 0 is the deadline of ReadChunk calls (instead of
  // options.call_timeout): the stripe client reconstructs around a slow read
  // long before, so this only bounds how long an abandoned read keeps a
  // thread and a connection busy.
  // `grants` (not owned; optional): where a client identity gets chunk
  // grants (chunk_grant.h); every chunk data request then goes as a
  // GrantedCall with the grants of the inodes it names, and once more with
  // fresh ones when chunkd says one expired (EKEYEXPIRED). A batch of more
  // than kMaxGrantsPerCall files is split. Null: requests go bare (server
  // and admin identities need no grants).
  RemoteChunkService(std::string address, std::shared_ptr<const ClusterKey> key,
                     RpcClientOptions options = DefaultOptions(),
                     std::chrono::milliseconds read_timeout = {},
                     ChunkGrantSource* grants = nullptr);
  static RpcClientOptions DefaultOptions();

  Result<std::string> Ping();
  RpcClient& client() { return client_; }

  Status WriteChunk(const ChunkId& id, uint64_t version,
                    std::span<const uint8_t> data) override;
  Result<std::vector<uint8_t>> ReadChunk(const ChunkId& id, uint64_t version,
                                         uint32_t offset,
                                         uint32_t length) override;
  // Received straight into `out` (no vector, no copy).
  Status ReadChunkInto(const ChunkId& id, uint64_t version, uint32_t offset,
                       std::span<uint8_t> out) override;
  // By the earlier of `deadline` and the read timeout.
  Status ReadChunkIntoBy(
      const ChunkId& id, uint64_t version, uint32_t offset,
      std::span<uint8_t> out,
      std::chrono::steady_clock::time_point deadline) override;
  // One ReadChunkRanges request per kMaxChunkReadsPerRequest reads or
  // kMaxBulk bytes, by the earlier of `deadline` and the read timeout. A
  // transport error fails every read of that request; a chunkd that does
  // not know the message gets them one by one (ReadChunkIntoBy).
  // Bounded always (the read timeout), so never EOPNOTSUPP per read.
  std::vector<Status> ReadChunkRanges(
      std::span<const ChunkRangeRead> reads,
      std::chrono::steady_clock::time_point deadline) override;
  Status DeleteChunk(const ChunkId& id, uint64_t keep_version) override;
  Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo& after,
                                            uint32_t limit) override;
  Result<ChunkStoreStats> Stats() override;
  Status DeleteChunkVersion(const ChunkId& id, uint64_t version) override;
  // One frame per kMaxChunkVersionsPerDelete entries; a chunkd that does not
  // know the message gets them one by one.
  Status DeleteChunkVersions(std::span<const ChunkVersion> chunks) override;
  // Runs on the chunk server (a hard link there, no data on the wire).
  // Sends only the patch bytes; chunkd reads, patches and writes locally.
  Status PatchChunk(const ChunkId& id, uint64_t from_version,
                    uint64_t to_version, uint32_t length, uint32_t offset,
                    std::span<const uint8_t> bytes) override;
  Status CloneChunk(const ChunkId& id, uint64_t from_version,
                    uint64_t to_version, uint32_t length) override;
  // One ApplyChunkOps request (ops and their bytes in one frame) per
  // kMaxChunkOpsPerRequest ops or kMaxBulk bytes; the chunkd runs them in
  // one go and answers a Status per op. A transport error fails every op
  // of that request; a chunkd that does not know the message gets the ops
  // one by one (PatchChunk, CloneChunk, WriteChunk calls, in parallel). A
  // single op goes as its own message (PatchChunk ...), as before batches,
  // except a multi-range patch (PatchChunkRanges).
  std::vector<Status> ApplyChunkOps(std::span<const ChunkWriteOp> ops) override;
  // Server or admin identity: chunkd refuses every grant of identity
  // (entity, salt) from now on and closes its sessions (`auth rm`).
  Status RevokeGrants(const std::string& entity, const EntitySalt& salt);
  // Several ranges: one ApplyChunkOps request with this one op (only the
  // ranges' bytes on the wire). A chunkd without ApplyChunkOps: the
  // default (ReadChunk of the whole source, WriteChunk of the result).
  // One range: PatchChunk.
  Status PatchChunkRanges(const ChunkId& id, uint64_t from_version,
                          uint64_t to_version, uint32_t length,
                          std::span<const PatchRange> ranges,
                          std::span<const uint8_t> bytes) override;

 private:
  // Sends ops (at most kMaxChunkOpsPerRequest, their bytes at most
  // kMaxBulk) as one ApplyChunkOps request and fills out[i] per op. Returns
  // the request's own error (then `out` is untouched): EOPNOTSUPP from a
  // chunkd that does not know the message, or a transport error.
  Status SendApplyRequest(std::span<const ChunkWriteOp> ops,
                          std::span<Status> out);
  // Sends reads (at most kMaxChunkReadsPerRequest, their bytes at most
  // kMaxBulk) as one ReadChunkRanges request, fills out[i] per read and
  // copies each OK read's bytes into its buffer. Returns the request's own
  // error (then `out` is untouched), as SendApplyRequest.
  Status SendReadRequest(std::span<const ChunkRangeRead> reads,
                         std::span<Status> out, Deadline deadline);
  // The remote's per-item errno (0 = OK) and message as a Status.
  Status RemoteStatus(int32_t code, const std::string& message) const;
  // call(head) with a GrantedCall head holding grants of `op` for
  // `inodes` (distinct, at most kMaxGrantsPerCall) around message
  // `inner`, or call({}) when this stub sends no grants; once more with
  // fresh grants when chunkd answers EKEYEXPIRED.
  template <typename F>
  Status WithGrants(uint16_t inner, std::span<const uint64_t> inodes,
                    uint8_t op, F&& call);

  RpcClient client_;
  const std::chrono::milliseconds read_timeout_;
  ChunkGrantSource* const grants_;
};

}  // namespace stripefs::rpc

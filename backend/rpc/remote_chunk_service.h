// RemoteChunkService: ChunkService over RPC to one chunkd;
// ChunkServiceServer: the RpcHandler that serves any ChunkService (chunkd).
//
// Chunk bytes travel in the frame's bulk section: WriteChunk sends straight
// from the caller's span (one gather write, no copy), ReadChunk receives
// straight into the vector it returns, ReadChunkInto(By) straight into the
// caller's buffer (a FUSE reply, a cached stripe). Errors of the remote store
// come back as the same Status; transport failures are EHOSTDOWN / ETIMEDOUT /
// EACCES (see rpc_client.h) so the stripe client can treat the chunk as
// missing.
//
// Ownership: RemoteChunkService owns its RpcClient; ChunkServiceServer does
// not own the service. Thread-safety: both are safe from many threads.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/rpc_client.h"
#include "backend/rpc/rpc_server.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {

struct RpcCall;  // dispatch_table.h

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

// Serves a ChunkService. A WriteChunk's data arrives in the request frame's
// page-aligned bulk and is handed to the service as is (ChunkStore writes
// it with O_DIRECT, no staging copy, when its length is a multiple of
// 4 KiB). A ReadChunk is read with ReadChunkInto straight into a pooled
// page-aligned buffer that the reply is sent from (no zero-filled vector,
// no copy), given back to the pool once the reply is sent; pools by
// power-of-two size class up to 4 MiB keep at most ~4 MiB idle each
// (bigger reads get a buffer of their own). Thread-safe (the pools are).
class ChunkServiceServer final : public RpcHandler {
 public:
  explicit ChunkServiceServer(ChunkService* service);
  std::string Role() const override { return "chunkd"; }
  // Serves one request through the dispatch table (the .cc): one row per
  // message with its handler, whether it mutates and who may send it.
  void Handle(const Caller& caller, uint16_t type,
              std::span<const uint8_t> payload, AlignedBytes& bulk,
              RpcReply* reply) override;
  struct Rows;  // the table's handlers

  // Chunk grants (chunk_grant.h; docs/wire-protocol.md "Chunk grants").
  // From this call on, a client identity's chunk data requests (reads,
  // writes, clones, patches, version drops) must come as GrantedCalls
  // whose grants `key` verifies for that identity, that have not expired
  // by `now_ms` (with kGrantClockSlackMs), whose identity was not revoked,
  // and that cover every chunk the request names with the op it needs;
  // anything else is refused before the request is decoded further or any
  // chunk is touched, and counted. Server and admin sessions need none.
  // Call before the server starts. chunkd always does; without it a client
  // is not checked (in-process tests of other things).
  void RequireGrants(GrantKey key,
                     std::function<uint64_t()> now_ms = UnixMillis);
  // Called (on a server thread) with each identity RevokeGrants names,
  // after its grants are void: chunkd closes its sessions there. Call
  // before the server starts; must be thread-safe.
  void OnGrantsRevoked(std::function<void(const std::string&)> f) {
    on_revoked_ = std::move(f);
  }
  struct GrantCounters {
    uint64_t verified = 0;  // grants whose MAC, expiry and identity held
    uint64_t refused = 0;   // requests refused for a missing or bad grant
  };
  GrantCounters grant_counters() const {
    return {grants_verified_.load(std::memory_order_relaxed),
            grants_refused_.load(std::memory_order_relaxed)};
  }

 private:
  // OK, or the refusal of the request's grants (counted).
  Status CheckGrants(const Caller& caller, const GrantedCall& call);
  // OK if `granted` (null: unchecked) covers chunk `id` for `op`, else
  // EACCES (counted).
  Status Covered(const RpcCall& c, const ChunkId& id, uint8_t op);
  void Revoke(const std::string& entity, const EntitySalt& salt);

  static constexpr int kMinReadShift = 16;  // 64 KiB
  static constexpr int kMaxReadShift = 22;  // 4 MiB
  // `length` bytes of reply buffer, owned by `reply`.
  std::span<uint8_t> ReplyBuffer(size_t length, RpcReply* reply);

  ChunkService* service_;
  std::vector<BufferPool> read_pools_;  // index: shift - kMinReadShift
  std::optional<GrantKey> grant_key_;   // set before serving
  std::function<uint64_t()> now_ms_;
  std::function<void(const std::string&)> on_revoked_;
  std::atomic<uint64_t> grants_verified_{0};
  std::atomic<uint64_t> grants_refused_{0};
  // Revoked identities (name and salt) -> chunkd's time of revocation;
  // kept until every grant issued before has expired.
  std::atomic<bool> any_revoked_{false};
  Mutex revoked_mu_;
  std::map<std::pair<std::string, EntitySalt>, uint64_t> revoked_
      STRIPEFS_GUARDED_BY(revoked_mu_);
};

}  // namespace stripefs::rpc

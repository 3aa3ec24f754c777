// ChunkServiceServer: the RpcHandler that serves any ChunkService (chunkd);
// its clients are RemoteChunkService stubs (remote_chunk_service.h).
//
// Requests go through a dispatch table (chunk_service_server.cc, one row
// per message: handler, whether it mutates, who may send it) and, for a
// client identity, through the chunk grant check first (chunk_grant.h).
//
// Ownership: does not own the service. Thread-safety: safe from many
// threads; the revoked-identity map is guarded by revoked_mu_ (checked by
// clang's -Wthread-safety), the counters are atomics, and everything set
// by RequireGrants / OnGrantsRevoked is read-only once serving starts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/rpc_server.h"
#include "common/buffer_pool.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {

struct RpcCall;  // dispatch_table.h

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

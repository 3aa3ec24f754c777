// Chunk grants (issue 35 hole 2; docs/wire-protocol.md "Chunk grants"):
// metad's short-lived permission for one client identity to read, or read
// and write, the chunks of one inode, which chunkd checks on every chunk
// request of a client session before it does any work.
//
// A grant is 80 bytes, fixed layout (all integers little-endian):
//   0  u8  version (1)
//   1  u8  ops: bit0 read, bit1 write (write, clone, patch, drop versions)
//   2  u16 reserved, 0
//   4  u32 reserved, 0
//   8  u64 inode
//   16 u64 first stripe \ the stripes covered, inclusive (metad grants
//   24 u64 last stripe  / a whole file: 0 .. 2^64-1)
//   32 u64 issued, ms since the Unix epoch (metad's clock)
//   40 u64 expires, likewise
//   48 32  MAC = HMAC-SHA256(grant key, "stripefs chunk grant" || volume
//          UUID (16) || identity name (48, NUL-padded) || identity salt
//          (16) || bytes 0..47)
// The identity is not on the wire: chunkd takes the one its session
// proved, so a grant works only on sessions of the identity (and the
// generation: a re-added name has a new salt) metad gave it to. The grant
// key is HKDF-SHA256(server key, salt = volume UUID, info "stripefs chunk
// grant key"): metad and every chunkd derive it, clients never hold it.
//
// A client sends a chunk request under grants as a GrantedCall (message
// type kGrantedCallType) whose payload is
//   u16 inner message type | u8 grant count n (1..kMaxGrantsPerCall) |
//   u8 reserved 0 | n grants | the inner message's request payload
// with the inner message's bulk as the frame's bulk; the reply is the inner
// message's reply. The decoders here are bounds-checked, allocate nothing
// and are fuzzed (rpc_fuzz_payload).
//
// Pure values and functions, and GrantKey (immutable): thread-safe.
// ChunkGrantCache: all methods may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/identity.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {

inline constexpr uint8_t kGrantRead = 1 << 0;
inline constexpr uint8_t kGrantWrite = 1 << 1;
inline constexpr uint8_t kGrantAllOps = kGrantRead | kGrantWrite;
inline constexpr uint8_t kChunkGrantVersion = 1;
inline constexpr size_t kChunkGrantBodySize = 48;
inline constexpr size_t kChunkGrantSize = kChunkGrantBodySize + kMacSize;
// Grants one GrantedCall may carry (one HMAC each to check): a batch of
// chunk ops of more files is split by the client.
inline constexpr size_t kMaxGrantsPerCall = 32;
inline constexpr size_t kGrantedCallHeadSize = 4;
// The GrantedCall message type (wire_messages.h names it; not a
// MetaService/ChunkService call of its own, so not in that list).
inline constexpr uint16_t kGrantedCallType = 96;
// How long metad's grants are valid, and the clock difference chunkd
// tolerates between its clock and metad's (both ways).
inline constexpr uint64_t kGrantLifetimeMs = 120'000;
inline constexpr uint64_t kGrantClockSlackMs = 30'000;

using EncodedGrant = std::array<uint8_t, kChunkGrantSize>;

struct ChunkGrant {
  uint8_t ops = 0;
  uint64_t inode = 0;
  uint64_t first_stripe = 0;
  uint64_t last_stripe = UINT64_MAX;
  uint64_t issued_ms = 0;
  uint64_t expires_ms = 0;
  Mac mac{};
  friend bool operator==(const ChunkGrant&, const ChunkGrant&) = default;

  bool Covers(const ChunkId& id, uint8_t op) const {
    return (ops & op) == op && id.inode == inode && id.stripe >= first_stripe &&
           id.stripe <= last_stripe;
  }
};

// The 80 bytes of `g`.
EncodedGrant EncodeGrant(const ChunkGrant& g);
// False unless `in` is exactly 80 bytes of version 1 with zero reserved
// bytes, ops a non-empty subset of kGrantAllOps and first <= last stripe.
// Says nothing about the MAC (GrantKey::Verify).
bool DecodeGrant(std::span<const uint8_t> in, ChunkGrant* g);

// A GrantedCall's payload, decoded in place (spans into the input).
struct GrantedCall {
  uint16_t inner_type = 0;
  size_t count = 0;
  std::array<ChunkGrant, kMaxGrantsPerCall> grants{};
  std::span<const uint8_t> inner_payload;
};
// False unless `in` holds the head, 1..kMaxGrantsPerCall grants that each
// decode, and then the inner payload (possibly empty).
bool DecodeGrantedCall(std::span<const uint8_t> in, GrantedCall* out);
// The head and grants of a GrantedCall (the inner payload follows them).
std::vector<uint8_t> EncodeGrantedHead(uint16_t inner_type,
                                       std::span<const EncodedGrant> grants);

// The key metad signs grants with and chunkd checks them with.
class GrantKey {
 public:
  // EPERM unless `server_key` is the server key ("server").
  static Result<GrantKey> Derive(const ClusterKey& server_key,
                                 const VolumeId& volume);
  // Fills g->mac for identity `who`.
  void Sign(ChunkGrant* g, const Caller& who) const;
  // Whether g's MAC is the one Sign gives for `who` (constant time).
  bool Verify(const ChunkGrant& g, const Caller& who) const;
  const VolumeId& volume() const { return volume_; }

 private:
  GrantKey(std::shared_ptr<const ClusterKey> key, const VolumeId& volume)
      : key_(std::move(key)), volume_(volume) {}
  Mac Compute(const ChunkGrant& g, const Caller& who) const;
  std::shared_ptr<const ClusterKey> key_;
  VolumeId volume_;
};

// Milliseconds since the Unix epoch (system clock): grants' time base.
uint64_t UnixMillis();

// Where a client's chunk stub gets grants (a cache in front of metad).
class ChunkGrantSource {
 public:
  virtual ~ChunkGrantSource() = default;
  // A grant with at least `ops` for `inode`, encoded as metad gave it.
  // metad's refusal as is (EROFS: a read-only client asked to write;
  // EACCES: outside its --path; ENOENT: no such inode).
  virtual Result<EncodedGrant> Get(uint64_t inode, uint8_t ops) = 0;
  // chunkd said a grant of `inode` expired: ask metad anew next time.
  virtual void Invalidate(uint64_t inode) = 0;
};

// ChunkGrantSource that asks `fetch` (metad's GrantChunks) and keeps each
// grant for half the lifetime metad gave it (measured on this host's
// steady clock, so clock differences with metad do not matter), then asks
// again: a grant chunkd sees is never near its expiry. A write asks for
// read and write at once (one grant serves both). At most kMaxEntries
// inodes are kept (then the cache starts over).
class ChunkGrantCache final : public ChunkGrantSource {
 public:
  // fetch(inode, ops) -> (grant, lifetime in ms).
  using Fetch = std::function<Result<std::pair<EncodedGrant, uint32_t>>(
      uint64_t inode, uint8_t ops)>;
  static constexpr size_t kMaxEntries = 65536;
  explicit ChunkGrantCache(Fetch fetch) : fetch_(std::move(fetch)) {}
  Result<EncodedGrant> Get(uint64_t inode, uint8_t ops) override;
  void Invalidate(uint64_t inode) override;
  uint64_t fetches() const { return fetches_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    EncodedGrant grant;
    uint8_t ops;
    Clock::time_point renew_at;
  };
  const Fetch fetch_;
  std::atomic<uint64_t> fetches_{0};
  Mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_ STRIPEFS_GUARDED_BY(mu_);
};

}  // namespace stripefs::rpc

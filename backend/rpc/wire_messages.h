// The stripefs RPC messages: message type numbers, the request and response
// field lists of each (as std::tuple), and payload codecs for every value
// type of MetaService / ChunkService (meta_types.h, chunk_service.h).
//
// A request payload is the encoded Request tuple. A response payload is the
// remote Status (i32 errno code, string message) followed, only when OK, by
// the encoded Response tuple. Chunk bytes never go through the payload: they
// travel in the frame's bulk section (WriteChunk request, ReadChunk
// response). Encoding is canonical: decoding then re-encoding reproduces the
// input exactly (the fuzz targets check this).
//
// Pure functions and types; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/meta/meta_types.h"
#include "backend/rpc/client_table.h"
#include "backend/rpc/identity_table.h"
#include "backend/rpc/wire_codec.h"
#include "common/status.h"

namespace stripefs::rpc {

// X(name, number, idempotent): idempotent calls may be retried once on a
// fresh connection when a pooled connection turns out to be dead.
#define STRIPEFS_RPC_MESSAGES(X)       \
  X(Ping, 1, true)                     \
  X(GetGeometry, 16, true)             \
  X(GetClusterMap, 17, true)           \
  X(UpsertServer, 18, true)            \
  X(SetServerState, 19, true)          \
  X(Lookup, 20, true)                  \
  X(GetAttr, 21, true)                 \
  X(SetAttr, 22, false)                \
  X(MkNode, 23, false)                 \
  X(Mkdir, 24, false)                  \
  X(Symlink, 25, false)                \
  X(ReadLink, 26, true)                \
  X(Link, 27, false)                   \
  X(Unlink, 28, false)                 \
  X(Rmdir, 29, false)                  \
  X(Rename, 30, false)                 \
  X(ReadDir, 31, true)                 \
  X(PurgeInode, 32, false)             \
  X(ListOrphans, 33, true)             \
  X(StatFs, 34, true)                  \
  X(SetXattr, 35, false)               \
  X(GetXattr, 36, true)                \
  X(ListXattr, 37, true)               \
  X(RemoveXattr, 38, false)            \
  X(AllocateVersions, 39, true)        \
  X(GetStripes, 40, true)              \
  X(CommitStripe, 41, false)           \
  X(SetStripeMissing, 42, false)       \
  X(ListStripes, 43, true)             \
  X(CommitStripes, 44, false)          \
  X(DropStripes, 45, false)            \
  X(WriteChunk, 64, true)              \
  X(ReadChunk, 65, true)               \
  X(DeleteChunk, 66, true)             \
  X(ListChunks, 67, true)              \
  X(ChunkStats, 68, true)              \
  X(DeleteChunkVersion, 69, true)      \
  X(CloneChunk, 70, true)              \
  X(PatchChunk, 71, true)              \
  X(DeleteChunkVersions, 72, true)     \
  X(PurgeInodes, 73, false)            \
  X(SyncMetadata, 74, true)            \
  X(ClientHeartbeat, 75, true)         \
  X(ListClients, 76, true)             \
  X(ListOrphanStripes, 77, true)       \
  X(CreateEntry, 78, false)            \
  X(UnlinkEntry, 79, false)            \
  X(ApplyChunkOps, 80, true)           \
  X(ReadChunkRanges, 81, true)         \
  X(AuthAdd, 82, false)                \
  X(AuthList, 83, true)                \
  X(AuthRemove, 84, false)             \
  X(CommitStripesKeepTimes, 85, false) \
  X(DropStripesKeepTimes, 86, false)   \
  X(GrantChunks, 87, true)             \
  X(RevokeGrants, 88, true)

enum class MsgType : uint16_t {
#define STRIPEFS_X(name, num, idem) k##name = num,
  STRIPEFS_RPC_MESSAGES(STRIPEFS_X)
#undef STRIPEFS_X
};

// Name of a message type ("Lookup"), or nullptr when unknown. Knows
// GrantedCall too (kGrantedCallType, chunk_grant.h: an envelope around a
// chunk message, not in the list above).
const char* MsgTypeName(uint16_t type);
bool MsgTypeIdempotent(uint16_t type);
// Every known type, in numeric order.
const std::vector<MsgType>& AllMsgTypes();

// One op of an ApplyChunkOps request (ChunkWriteOp without its bytes): the
// op's bytes are the next `size` bytes of the frame's bulk section, in op
// order. `kind` is ChunkWriteOp::Kind's number (checked by the server). A
// kPatch with range_count > 0 patches the next range_count entries of the
// request's range list (sorted, disjoint, inside `length`, adding up to
// `size`; `offset` is then unused and sent as 0); range_count 0 is the
// single range [offset, offset + size).
struct ChunkOpHeader {
  uint32_t kind = 0;
  ChunkId id;
  uint64_t from_version = 0;
  uint64_t to_version = 0;
  uint32_t length = 0;
  uint32_t offset = 0;
  uint32_t size = 0;
  uint32_t range_count = 0;
};

// One read of a ReadChunkRanges request (ChunkRangeRead without its
// buffer): `length` bytes of chunk (id, version) from `offset`.
struct ChunkReadHeader {
  ChunkId id;
  uint64_t version = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
};

// ---- value codecs -----------------------------------------------------------
void Put(Encoder& e, const Geometry& v);
void Put(Encoder& e, const Timespec& v);
void Put(Encoder& e, const InodeAttr& v);
void Put(Encoder& e, const SetAttrRequest& v);
void Put(Encoder& e, const DirEntry& v);
void Put(Encoder& e, const StripeVersion& v);
void Put(Encoder& e, const ObsoleteStripe& v);
void Put(Encoder& e, const StripeCommit& v);
void Put(Encoder& e, ServerState v);
void Put(Encoder& e, const ServerInfo& v);
void Put(Encoder& e, const ClusterMap& v);
void Put(Encoder& e, const FsStats& v);
void Put(Encoder& e, const StripeRef& v);
void Put(Encoder& e, const ChunkId& v);
void Put(Encoder& e, const ChunkVersion& v);
void Put(Encoder& e, const ChunkOpHeader& v);
void Put(Encoder& e, const ChunkReadHeader& v);
void Put(Encoder& e, const PatchRange& v);
void Put(Encoder& e, const ChunkInfo& v);
void Put(Encoder& e, const ChunkStoreStats& v);
void Put(Encoder& e, const RepairReport& v);
void Put(Encoder& e, const ClientRecord& v);
void Put(Encoder& e, const IdentityRecord& v);
bool Get(Decoder& d, Geometry* v);
bool Get(Decoder& d, Timespec* v);
bool Get(Decoder& d, InodeAttr* v);
bool Get(Decoder& d, SetAttrRequest* v);
bool Get(Decoder& d, DirEntry* v);
bool Get(Decoder& d, StripeVersion* v);
bool Get(Decoder& d, ObsoleteStripe* v);
bool Get(Decoder& d, StripeCommit* v);
bool Get(Decoder& d, ServerState* v);
bool Get(Decoder& d, ServerInfo* v);
bool Get(Decoder& d, ClusterMap* v);
bool Get(Decoder& d, FsStats* v);
bool Get(Decoder& d, StripeRef* v);
bool Get(Decoder& d, ChunkId* v);
bool Get(Decoder& d, ChunkVersion* v);
bool Get(Decoder& d, ChunkOpHeader* v);
bool Get(Decoder& d, ChunkReadHeader* v);
bool Get(Decoder& d, PatchRange* v);
bool Get(Decoder& d, ChunkInfo* v);
bool Get(Decoder& d, ChunkStoreStats* v);
bool Get(Decoder& d, RepairReport* v);
bool Get(Decoder& d, ClientRecord* v);
bool Get(Decoder& d, IdentityRecord* v);

template <typename T>
void Put(Encoder& e, const std::vector<T>& v) {
  e.U32(static_cast<uint32_t>(v.size()));
  for (const T& x : v) Put(e, x);
}
template <typename T>
bool Get(Decoder& d, std::vector<T>* v) {
  uint32_t n;
  if (!d.Count(&n, MinWireSize<T>())) return false;
  v->clear();
  for (uint32_t i = 0; i < n; ++i) {
    T x{};
    if (!Get(d, &x)) return false;
    v->push_back(std::move(x));
  }
  return true;
}

template <typename... T>
void PutTuple(Encoder& e, const std::tuple<T...>& t) {
  std::apply([&](const auto&... x) { (Put(e, x), ...); }, t);
}
template <typename... T>
bool GetTuple(Decoder& d, std::tuple<T...>* t) {
  return std::apply([&](auto&... x) { return (Get(d, &x) && ... && true); },
                    *t);
}

// Status on the wire: i32 code (0 = OK, else 1..4095), string message.
void PutStatus(Encoder& e, const Status& s);
bool GetStatus(Decoder& d, Status* s);

// ---- message field lists ----------------------------------------------------
template <MsgType T>
struct Msg;

template <typename Req, typename Resp>
struct MsgDef {
  using Request = Req;
  using Response = Resp;
};
using U64 = uint64_t;
using U32 = uint32_t;
using Str = std::string;
template <typename... T>
using Tup = std::tuple<T...>;

// clang-format off
template <>
struct Msg<MsgType::kPing> : MsgDef<Tup<>, Tup<Str, U32>> {};  // role, protocol version
template <>
struct Msg<MsgType::kGetGeometry> : MsgDef<Tup<>, Tup<Geometry>> {};
template <>
struct Msg<MsgType::kGetClusterMap> : MsgDef<Tup<>, Tup<ClusterMap>> {};
template <>
struct Msg<MsgType::kUpsertServer> : MsgDef<Tup<ServerInfo>, Tup<>> {};
template <>
struct Msg<MsgType::kSetServerState> : MsgDef<Tup<U32, ServerState>, Tup<>> {};
template <>
struct Msg<MsgType::kLookup> : MsgDef<Tup<U64, Str>, Tup<InodeAttr>> {};
template <>
struct Msg<MsgType::kGetAttr> : MsgDef<Tup<U64>, Tup<InodeAttr>> {};
template <>
struct Msg<MsgType::kSetAttr> : MsgDef<Tup<U64, SetAttrRequest>, Tup<InodeAttr, std::vector<ObsoleteStripe>>> {};
template <>
struct Msg<MsgType::kMkNode> : MsgDef<Tup<U64, Str, U32, U32, U32, U32>, Tup<InodeAttr>> {};  // parent name mode uid gid rdev
template <>
struct Msg<MsgType::kMkdir> : MsgDef<Tup<U64, Str, U32, U32, U32>, Tup<InodeAttr>> {};        // parent name mode uid gid
template <>
struct Msg<MsgType::kSymlink> : MsgDef<Tup<U64, Str, Str, U32, U32>, Tup<InodeAttr>> {};      // parent name target uid gid
template <>
struct Msg<MsgType::kReadLink> : MsgDef<Tup<U64>, Tup<Str>> {};
template <>
struct Msg<MsgType::kLink> : MsgDef<Tup<U64, U64, Str>, Tup<InodeAttr>> {};
template <>
struct Msg<MsgType::kUnlink> : MsgDef<Tup<U64, Str>, Tup<InodeAttr>> {};
template <>
struct Msg<MsgType::kCreateEntry> : MsgDef<Tup<U64, Str, U32, U32, U32, U32, U32>, Tup<InodeAttr, InodeAttr>> {};  // parent name mode uid gid rdev flags -> node, parent
template <>
struct Msg<MsgType::kUnlinkEntry> : MsgDef<Tup<U64, Str>, Tup<InodeAttr, InodeAttr>> {};  // parent name -> unlinked inode, parent
template <>
struct Msg<MsgType::kRmdir> : MsgDef<Tup<U64, Str>, Tup<>> {};
template <>
struct Msg<MsgType::kRename> : MsgDef<Tup<U64, Str, U64, Str, U32>, Tup<U64>> {};             // -> replaced inode
template <>
struct Msg<MsgType::kReadDir> : MsgDef<Tup<U64, U64, U32>, Tup<std::vector<DirEntry>>> {};
template <>
struct Msg<MsgType::kPurgeInode> : MsgDef<Tup<U64>, Tup<std::vector<ObsoleteStripe>>> {};
template <>
struct Msg<MsgType::kPurgeInodes> : MsgDef<Tup<std::vector<U64>>, Tup<std::vector<int32_t>, std::vector<ObsoleteStripe>>> {};  // inos -> per-inode errno (0 = purged), stripes
template <>
struct Msg<MsgType::kListOrphanStripes> : MsgDef<Tup<std::vector<U64>>, Tup<std::vector<int32_t>, std::vector<ObsoleteStripe>>> {};  // inos -> per-inode errno (0 = orphan), stripes
template <>
struct Msg<MsgType::kSyncMetadata> : MsgDef<Tup<>, Tup<>> {};  // MetaService::Sync
template <>
struct Msg<MsgType::kListOrphans> : MsgDef<Tup<>, Tup<std::vector<U64>>> {};
template <>
struct Msg<MsgType::kStatFs> : MsgDef<Tup<>, Tup<FsStats>> {};
template <>
struct Msg<MsgType::kSetXattr> : MsgDef<Tup<U64, Str, Str, U32>, Tup<>> {};
template <>
struct Msg<MsgType::kGetXattr> : MsgDef<Tup<U64, Str>, Tup<Str>> {};
template <>
struct Msg<MsgType::kListXattr> : MsgDef<Tup<U64>, Tup<std::vector<Str>>> {};
template <>
struct Msg<MsgType::kRemoveXattr> : MsgDef<Tup<U64, Str>, Tup<>> {};
template <>
struct Msg<MsgType::kAllocateVersions> : MsgDef<Tup<U32>, Tup<U64>> {};
template <>
struct Msg<MsgType::kGetStripes> : MsgDef<Tup<U64, U64, U64>, Tup<std::vector<StripeVersion>>> {};
template <>
struct Msg<MsgType::kCommitStripe> : MsgDef<Tup<U64, StripeVersion, U64, U64>, Tup<ObsoleteStripe>> {};  // ino sv expected min_size
template <>
struct Msg<MsgType::kCommitStripes> : MsgDef<Tup<U64, std::vector<StripeCommit>, U64>, Tup<std::vector<ObsoleteStripe>>> {};  // ino commits min_size
// As CommitStripes, leaving mtime and ctime (MetaService::CommitStripesKeepTimes).
template <>
struct Msg<MsgType::kCommitStripesKeepTimes> : MsgDef<Tup<U64, std::vector<StripeCommit>, U64>, Tup<std::vector<ObsoleteStripe>>> {};  // ino commits min_size
template <>
struct Msg<MsgType::kSetStripeMissing> : MsgDef<Tup<U64, U64, U64, U32>, Tup<>> {};
template <>
struct Msg<MsgType::kDropStripes> : MsgDef<Tup<U64, U64, U64>, Tup<std::vector<ObsoleteStripe>>> {};  // ino first count
template <>
struct Msg<MsgType::kDropStripesKeepTimes> : MsgDef<Tup<U64, U64, U64>, Tup<std::vector<ObsoleteStripe>>> {};  // ino first count
template <>
struct Msg<MsgType::kListStripes> : MsgDef<Tup<U64, U64, U32>, Tup<std::vector<StripeRef>>> {};
template <>
struct Msg<MsgType::kWriteChunk> : MsgDef<Tup<ChunkId, U64>, Tup<>> {};                  // + bulk: data
template <>
struct Msg<MsgType::kReadChunk> : MsgDef<Tup<ChunkId, U64, U32, U32>, Tup<>> {};         // -> bulk: data
template <>
struct Msg<MsgType::kDeleteChunk> : MsgDef<Tup<ChunkId, U64>, Tup<>> {};
template <>
struct Msg<MsgType::kListChunks> : MsgDef<Tup<ChunkInfo, U32>, Tup<std::vector<ChunkInfo>>> {};
template <>
struct Msg<MsgType::kChunkStats> : MsgDef<Tup<>, Tup<ChunkStoreStats>> {};
template <>
struct Msg<MsgType::kDeleteChunkVersion> : MsgDef<Tup<ChunkId, U64>, Tup<>> {};
template <>
struct Msg<MsgType::kCloneChunk>
    : MsgDef<Tup<ChunkId, U64, U64, U32>, Tup<>> {};  // id from to length
template <>
struct Msg<MsgType::kPatchChunk>
    : MsgDef<Tup<ChunkId, U64, U64, U32, U32>, Tup<>> {};  // id from to length offset + bulk: bytes
template <>
struct Msg<MsgType::kDeleteChunkVersions> : MsgDef<Tup<std::vector<ChunkVersion>>, Tup<>> {};
template <>
struct Msg<MsgType::kApplyChunkOps> : MsgDef<Tup<std::vector<ChunkOpHeader>, std::vector<PatchRange>>, Tup<std::vector<int32_t>, std::vector<Str>>> {};  // ops, their patch ranges + bulk: their bytes -> per-op errno (0 = OK), message
template <>
struct Msg<MsgType::kReadChunkRanges> : MsgDef<Tup<std::vector<ChunkReadHeader>>, Tup<std::vector<int32_t>, std::vector<Str>>> {};  // reads -> per-read errno (0 = OK), message + bulk: the OK reads' bytes back to back, in order
template <>
struct Msg<MsgType::kClientHeartbeat> : MsgDef<Tup<ClientRecord>, Tup<>> {};  // client_table.h
template <>
struct Msg<MsgType::kListClients> : MsgDef<Tup<>, Tup<std::vector<ClientRecord>>> {};
template <>
struct Msg<MsgType::kAuthAdd> : MsgDef<Tup<IdentityRecord>, Tup<std::vector<uint8_t>, std::vector<uint8_t>>> {};  // identity_table.h -> salt, key wrapped for the caller (docs/wire-protocol.md)
template <>
struct Msg<MsgType::kAuthList> : MsgDef<Tup<>, Tup<std::vector<IdentityRecord>>> {};
template <>
struct Msg<MsgType::kAuthRemove> : MsgDef<Tup<Str>, Tup<>> {};  // entity
template <>
struct Msg<MsgType::kGrantChunks> : MsgDef<Tup<U64, U32>, Tup<std::vector<uint8_t>, U32>> {};  // inode, ops (chunk_grant.h) -> the 80-byte grant, its lifetime in ms
template <>
struct Msg<MsgType::kRevokeGrants> : MsgDef<Tup<Str, std::vector<uint8_t>>, Tup<>> {};  // entity, salt: chunkd refuses its grants, closes its sessions
// clang-format on
// Entries per DeleteChunkVersions frame (28 bytes each: far below
// kMaxPayload; the client splits longer lists).
inline constexpr size_t kMaxChunkVersionsPerDelete = 8192;
// Ops per ApplyChunkOps frame (44 bytes each, plus 8 per patch range, plus up
// to ~100 bytes of status message each in the response: far below kMaxPayload);
// their bytes together at most kMaxBulk. The client splits larger batches.
inline constexpr size_t kMaxChunkOpsPerRequest = 4096;
// Reads per ReadChunkRanges frame (32 bytes each, plus up to ~100 bytes of
// status message each in the response); their lengths together at most
// kMaxBulk. The client splits larger batches.
inline constexpr size_t kMaxChunkReadsPerRequest = 4096;
// Patch ranges per ApplyChunkOps frame (8 bytes each); the client splits
// before it.
inline constexpr size_t kMaxPatchRangesPerRequest = 65536;
// clang-format off
// clang-format on

// ---- whole payloads ---------------------------------------------------------
template <MsgType T>
std::vector<uint8_t> EncodeRequest(const typename Msg<T>::Request& req) {
  std::vector<uint8_t> out;
  Encoder e(&out);
  PutTuple(e, req);
  return out;
}
template <MsgType T>
bool DecodeRequest(std::span<const uint8_t> in, typename Msg<T>::Request* req) {
  Decoder d(in);
  return GetTuple(d, req) && d.Done();
}
// `resp` is ignored (and may be default) when `s` is an error.
template <MsgType T>
std::vector<uint8_t> EncodeResponse(const Status& s,
                                    const typename Msg<T>::Response& resp) {
  std::vector<uint8_t> out;
  Encoder e(&out);
  PutStatus(e, s);
  if (s.ok()) PutTuple(e, resp);
  return out;
}
// False when malformed. Otherwise *remote is the server's Status and, when
// that is OK, *resp holds the results.
template <MsgType T>
bool DecodeResponse(std::span<const uint8_t> in, Status* remote,
                    typename Msg<T>::Response* resp) {
  Decoder d(in);
  if (!GetStatus(d, remote)) return false;
  if (remote->ok() && !GetTuple(d, resp)) return false;
  return d.Done();
}

// Decodes `in` as the request (or response) payload of message `type` and,
// when that succeeds, checks that re-encoding reproduces it; aborts if not.
// Returns whether it decoded. For fuzzing and tests; unknown type -> false.
// A GrantedCall request decodes its head and grants (chunk_grant.h) and
// then its inner payload as the inner message's request; its response is
// the inner message's, so a GrantedCall response -> false.
bool DecodePayloadChecked(uint16_t type, bool response,
                          std::span<const uint8_t> in);

}  // namespace stripefs::rpc

#include "backend/rpc/remote_chunk_service.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "backend/rpc/dispatch_table.h"
#include "backend/rpc/typed_call.h"

namespace stripefs::rpc {

RpcClientOptions RemoteChunkService::DefaultOptions() {
  RpcClientOptions o;
  o.peer_role = "chunkd";
  return o;
}

RemoteChunkService::RemoteChunkService(std::string address,
                                       std::shared_ptr<const ClusterKey> key,
                                       RpcClientOptions options,
                                       std::chrono::milliseconds read_timeout,
                                       ChunkGrantSource* grants)
    : client_(std::move(address), std::move(key), std::move(options)),
      read_timeout_(read_timeout),
      grants_(grants) {}

namespace {

constexpr uint16_t Type(MsgType t) { return static_cast<uint16_t>(t); }

// The distinct inodes of one request, in order of first appearance (a
// request carries at most kMaxGrantsPerCall, so a scan is cheap).
struct Inodes {
  std::vector<uint64_t> list;
  bool Has(uint64_t ino) const {
    return std::find(list.begin(), list.end(), ino) != list.end();
  }
  void Add(uint64_t ino) {
    if (!Has(ino)) list.push_back(ino);
  }
  // Whether `ino` can join without passing kMaxGrantsPerCall.
  bool Fits(uint64_t ino) const {
    return list.size() < kMaxGrantsPerCall || Has(ino);
  }
};

}  // namespace

template <typename F>
Status RemoteChunkService::WithGrants(uint16_t inner,
                                      std::span<const uint64_t> inodes,
                                      uint8_t op, F&& call) {
  if (grants_ == nullptr) return call(std::span<const uint8_t>());
  for (int attempt = 0;; ++attempt) {
    std::vector<EncodedGrant> got;
    got.reserve(inodes.size());
    for (uint64_t ino : inodes) {
      auto g = grants_->Get(ino, op);
      if (!g.ok())
        return g.status().Annotate("chunk grant for inode " +
                                   std::to_string(ino) + " from metad");
      got.push_back(*g);
    }
    const std::vector<uint8_t> head = EncodeGrantedHead(inner, got);
    Status st = call(std::span<const uint8_t>(head));
    // A grant chunkd saw as expired (clocks apart, or a long stall): ask
    // metad for fresh ones, once.
    if (st.code() != EKEYEXPIRED || attempt > 0) return st;
    for (uint64_t ino : inodes) grants_->Invalidate(ino);
  }
}

Result<std::string> RemoteChunkService::Ping() {
  Msg<MsgType::kPing>::Response resp;
  Status s = CallTyped<MsgType::kPing>(client_, {}, &resp);
  if (!s.ok()) return s;
  return std::get<0>(resp);
}

Status RemoteChunkService::WriteChunk(const ChunkId& id, uint64_t version,
                                      std::span<const uint8_t> data) {
  if (data.size() > kMaxBulk) {
    return Status::InvalidArgument("chunk of " + std::to_string(data.size()) +
                                   " bytes exceeds the wire limit of " +
                                   std::to_string(kMaxBulk));
  }
  const uint64_t ino = id.inode;
  return WithGrants(Type(MsgType::kWriteChunk), {&ino, 1}, kGrantWrite,
                    [&](std::span<const uint8_t> head) {
                      Msg<MsgType::kWriteChunk>::Response resp;
                      return CallTyped<MsgType::kWriteChunk>(
                          client_, {id, version}, &resp, data, nullptr, {},
                          head);
                    });
}

Result<std::vector<uint8_t>> RemoteChunkService::ReadChunk(const ChunkId& id,
                                                           uint64_t version,
                                                           uint32_t offset,
                                                           uint32_t length) {
  if (length > 0) {
    // Received in place (the frame's bulk is an AlignedBytes, not this
    // vector: receiving it there would add a copy).
    std::vector<uint8_t> data(length);
    STRIPEFS_RETURN_IF_ERROR(
        ReadChunkIntoBy(id, version, offset, data, Deadline::max()));
    return data;
  }
  AlignedBytes none;
  const uint64_t ino = id.inode;
  Status s = WithGrants(Type(MsgType::kReadChunk), {&ino, 1}, kGrantRead,
                        [&](std::span<const uint8_t> head) {
                          Msg<MsgType::kReadChunk>::Response resp;
                          return CallTyped<MsgType::kReadChunk>(
                              client_, {id, version, offset, length}, &resp, {},
                              &none, read_timeout_, head);
                        });
  if (!s.ok()) return s;
  if (!none.empty()) {
    return Status(EPROTO, "chunkd at " + client_.address() + " returned " +
                              std::to_string(none.size()) +
                              " bytes for a 0-byte ReadChunk");
  }
  return std::vector<uint8_t>();
}

Status RemoteChunkService::ReadChunkInto(const ChunkId& id, uint64_t version,
                                         uint32_t offset,
                                         std::span<uint8_t> out) {
  return ReadChunkIntoBy(id, version, offset, out, Deadline::max());
}

Status RemoteChunkService::ReadChunkIntoBy(const ChunkId& id, uint64_t version,
                                           uint32_t offset,
                                           std::span<uint8_t> out,
                                           Deadline deadline) {
  if (out.size() > kMaxBulk) {
    return Status::InvalidArgument(
        "chunk read of " + std::to_string(out.size()) +
        " bytes exceeds the wire limit of " + std::to_string(kMaxBulk));
  }
  const auto timeout = read_timeout_.count() > 0
                           ? read_timeout_
                           : client_.options().call_timeout;
  deadline = std::min(deadline, Clock::now() + timeout);
  const uint64_t ino = id.inode;
  return WithGrants(
      Type(MsgType::kReadChunk), {&ino, 1}, kGrantRead,
      [&](std::span<const uint8_t> head) {
        Msg<MsgType::kReadChunk>::Response resp;
        return CallTypedInto<MsgType::kReadChunk>(
            client_, {id, version, offset, static_cast<uint32_t>(out.size())},
            &resp, out, deadline, head);
      });
}

Status RemoteChunkService::DeleteChunk(const ChunkId& id,
                                       uint64_t keep_version) {
  Msg<MsgType::kDeleteChunk>::Response resp;
  return CallTyped<MsgType::kDeleteChunk>(client_, {id, keep_version}, &resp);
}

Result<std::vector<ChunkInfo>> RemoteChunkService::ListChunks(
    const ChunkInfo& after, uint32_t limit) {
  Msg<MsgType::kListChunks>::Response resp;
  Status s = CallTyped<MsgType::kListChunks>(client_, {after, limit}, &resp);
  if (!s.ok()) return s;
  return std::get<0>(std::move(resp));
}

Result<ChunkStoreStats> RemoteChunkService::Stats() {
  Msg<MsgType::kChunkStats>::Response resp;
  Status s = CallTyped<MsgType::kChunkStats>(client_, {}, &resp);
  if (!s.ok()) return s;
  return std::get<0>(resp);
}

Status RemoteChunkService::DeleteChunkVersion(const ChunkId& id,
                                              uint64_t version) {
  const uint64_t ino = id.inode;
  return WithGrants(Type(MsgType::kDeleteChunkVersion), {&ino, 1}, kGrantWrite,
                    [&](std::span<const uint8_t> head) {
                      Msg<MsgType::kDeleteChunkVersion>::Response resp;
                      return CallTyped<MsgType::kDeleteChunkVersion>(
                          client_, {id, version}, &resp, {}, nullptr, {}, head);
                    });
}

Status RemoteChunkService::RevokeGrants(const std::string& entity,
                                        const EntitySalt& salt) {
  Msg<MsgType::kRevokeGrants>::Response resp;
  return CallTyped<MsgType::kRevokeGrants>(
      client_, {entity, std::vector<uint8_t>(salt.begin(), salt.end())}, &resp);
}

Status RemoteChunkService::DeleteChunkVersions(
    std::span<const ChunkVersion> chunks) {
  size_t at = 0;
  while (at < chunks.size()) {
    // The next request: as many entries as fit, of at most
    // kMaxGrantsPerCall files (one grant each).
    size_t end = at;
    Inodes inodes;
    while (end < chunks.size() && end - at < kMaxChunkVersionsPerDelete &&
           inodes.Fits(chunks[end].id.inode)) {
      inodes.Add(chunks[end].id.inode);
      ++end;
    }
    const auto part = chunks.subspan(at, end - at);
    at = end;
    Status st = WithGrants(
        Type(MsgType::kDeleteChunkVersions), inodes.list, kGrantWrite,
        [&](std::span<const uint8_t> head) {
          Msg<MsgType::kDeleteChunkVersions>::Response resp;
          return CallTyped<MsgType::kDeleteChunkVersions>(
              client_, {std::vector<ChunkVersion>(part.begin(), part.end())},
              &resp, {}, nullptr, {}, head);
        });
    // An older chunkd: the message is unknown there.
    if (st.code() == EOPNOTSUPP) st = ChunkService::DeleteChunkVersions(part);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status RemoteChunkService::CloneChunk(const ChunkId& id, uint64_t from_version,
                                      uint64_t to_version, uint32_t length) {
  const uint64_t ino = id.inode;
  return WithGrants(Type(MsgType::kCloneChunk), {&ino, 1}, kGrantWrite,
                    [&](std::span<const uint8_t> head) {
                      Msg<MsgType::kCloneChunk>::Response resp;
                      return CallTyped<MsgType::kCloneChunk>(
                          client_, {id, from_version, to_version, length},
                          &resp, {}, nullptr, {}, head);
                    });
}

Status RemoteChunkService::PatchChunk(const ChunkId& id, uint64_t from_version,
                                      uint64_t to_version, uint32_t length,
                                      uint32_t offset,
                                      std::span<const uint8_t> bytes) {
  if (bytes.size() > kMaxBulk) {
    return Status::InvalidArgument("patch of " + std::to_string(bytes.size()) +
                                   " bytes exceeds the wire limit of " +
                                   std::to_string(kMaxBulk));
  }
  const uint64_t ino = id.inode;
  return WithGrants(Type(MsgType::kPatchChunk), {&ino, 1}, kGrantWrite,
                    [&](std::span<const uint8_t> head) {
                      Msg<MsgType::kPatchChunk>::Response resp;
                      return CallTyped<MsgType::kPatchChunk>(
                          client_,
                          {id, from_version, to_version, length, offset}, &resp,
                          bytes, nullptr, {}, head);
                    });
}

Status RemoteChunkService::SendApplyRequest(std::span<const ChunkWriteOp> ops,
                                            std::span<Status> out) {
  std::vector<ChunkOpHeader> headers;
  headers.reserve(ops.size());
  std::vector<PatchRange> ranges;
  // The ops' bytes go out from the callers' buffers (one gather list);
  // neighbours that are adjacent in memory make one part.
  std::vector<std::span<const uint8_t>> bulk;
  bulk.reserve(ops.size());
  Inodes inodes;
  for (const ChunkWriteOp& op : ops) {
    inodes.Add(op.id.inode);
    const bool multi = !op.ranges.empty();
    headers.push_back({static_cast<uint32_t>(op.kind), op.id, op.from_version,
                       op.to_version, op.length, multi ? 0 : op.offset,
                       static_cast<uint32_t>(op.bytes.size()),
                       static_cast<uint32_t>(op.ranges.size())});
    ranges.insert(ranges.end(), op.ranges.begin(), op.ranges.end());
    if (op.bytes.empty()) continue;
    if (!bulk.empty() &&
        bulk.back().data() + bulk.back().size() == op.bytes.data()) {
      bulk.back() = {bulk.back().data(), bulk.back().size() + op.bytes.size()};
    } else {
      bulk.push_back(op.bytes);
    }
  }
  const Msg<MsgType::kApplyChunkOps>::Request req{std::move(headers),
                                                  std::move(ranges)};
  Msg<MsgType::kApplyChunkOps>::Response resp;
  Status st = WithGrants(Type(MsgType::kApplyChunkOps), inodes.list,
                         kGrantWrite, [&](std::span<const uint8_t> head) {
                           return CallTypedGather<MsgType::kApplyChunkOps>(
                               client_, req, &resp, bulk, head);
                         });
  if (!st.ok()) return st;
  const auto& codes = std::get<0>(resp);
  const auto& messages = std::get<1>(resp);
  if (codes.size() != ops.size() || messages.size() != ops.size()) {
    const Status bad(EPROTO, "chunkd at " + client_.address() + " answered " +
                                 std::to_string(codes.size()) +
                                 " statuses for " + std::to_string(ops.size()) +
                                 " chunk ops");
    for (Status& o : out) o = bad;
    return Status::Ok();
  }
  for (size_t i = 0; i < ops.size(); ++i)
    out[i] = RemoteStatus(codes[i], messages[i]);
  return Status::Ok();
}

Status RemoteChunkService::RemoteStatus(int32_t code,
                                        const std::string& message) const {
  if (code == 0) return Status::Ok();
  if (code > 0 && code < 4096) return Status(code, message);
  return Status(EPROTO, "chunkd at " + client_.address() +
                            " answered error code " + std::to_string(code));
}

Status RemoteChunkService::SendReadRequest(
    std::span<const ChunkRangeRead> reads, std::span<Status> out,
    Deadline deadline) {
  std::vector<ChunkReadHeader> headers;
  headers.reserve(reads.size());
  Inodes inodes;
  for (const ChunkRangeRead& r : reads) {
    headers.push_back(
        {r.id, r.version, r.offset, static_cast<uint32_t>(r.out.size())});
    inodes.Add(r.id.inode);
  }
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0)
    return Status(ETIMEDOUT, "chunk reads at " + client_.address() +
                                 ": deadline passed before sending");
  const Msg<MsgType::kReadChunkRanges>::Request req{std::move(headers)};
  Msg<MsgType::kReadChunkRanges>::Response resp;
  AlignedBytes bytes;
  STRIPEFS_RETURN_IF_ERROR(
      WithGrants(Type(MsgType::kReadChunkRanges), inodes.list, kGrantRead,
                 [&](std::span<const uint8_t> head) {
                   return CallTyped<MsgType::kReadChunkRanges>(
                       client_, req, &resp, {}, &bytes, left, head);
                 }));
  const auto& codes = std::get<0>(resp);
  const auto& messages = std::get<1>(resp);
  // The bulk holds exactly the OK reads' bytes, in order.
  uint64_t expected = 0;
  bool shaped = codes.size() == reads.size() && messages.size() == reads.size();
  for (size_t i = 0; shaped && i < reads.size(); ++i)
    if (codes[i] == 0) expected += reads[i].out.size();
  if (!shaped || expected != bytes.size()) {
    const Status bad(EPROTO, "chunkd at " + client_.address() + " answered " +
                                 std::to_string(codes.size()) +
                                 " statuses and " +
                                 std::to_string(bytes.size()) + " bytes for " +
                                 std::to_string(reads.size()) + " chunk reads");
    for (Status& o : out) o = bad;
    return Status::Ok();
  }
  size_t at = 0;
  for (size_t i = 0; i < reads.size(); ++i) {
    out[i] = RemoteStatus(codes[i], messages[i]);
    if (!out[i].ok()) continue;
    std::memcpy(reads[i].out.data(), bytes.data() + at, reads[i].out.size());
    at += reads[i].out.size();
  }
  return Status::Ok();
}

std::vector<Status> RemoteChunkService::ReadChunkRanges(
    std::span<const ChunkRangeRead> reads, Deadline deadline) {
  std::vector<Status> out(reads.size());
  const auto timeout = read_timeout_.count() > 0
                           ? read_timeout_
                           : client_.options().call_timeout;
  deadline = std::min(deadline, Clock::now() + timeout);
  size_t at = 0;
  while (at < reads.size()) {
    // The next request: as many reads as fit (at least one).
    size_t end = at;
    uint64_t bytes = 0;
    Inodes inodes;  // at most kMaxGrantsPerCall files per request
    while (end < reads.size() && end - at < kMaxChunkReadsPerRequest &&
           (end == at || (bytes + reads[end].out.size() <= kMaxBulk &&
                          inodes.Fits(reads[end].id.inode)))) {
      bytes += reads[end].out.size();
      inodes.Add(reads[end].id.inode);
      ++end;
    }
    if (bytes > kMaxBulk) {
      out[at] = Status::InvalidArgument(
          "chunk read of " + std::to_string(bytes) +
          " bytes exceeds the wire limit of " + std::to_string(kMaxBulk));
      at = end;
      continue;
    }
    const auto part = reads.subspan(at, end - at);
    Status st = SendReadRequest(
        part, std::span<Status>(out).subspan(at, end - at), deadline);
    if (st.code() == EOPNOTSUPP) {
      // An older chunkd: the message is unknown there.
      auto one_by_one = ChunkService::ReadChunkRanges(part, deadline);
      std::move(one_by_one.begin(), one_by_one.end(), out.begin() + at);
    } else if (!st.ok()) {
      for (size_t i = at; i < end; ++i) out[i] = st;
    }
    at = end;
  }
  return out;
}

Status RemoteChunkService::PatchChunkRanges(const ChunkId& id,
                                            uint64_t from_version,
                                            uint64_t to_version,
                                            uint32_t length,
                                            std::span<const PatchRange> ranges,
                                            std::span<const uint8_t> bytes) {
  STRIPEFS_RETURN_IF_ERROR(CheckPatchRanges(ranges, length, bytes.size()));
  if (ranges.size() <= 1 || bytes.size() > kMaxBulk ||
      ranges.size() > kMaxPatchRangesPerRequest) {
    return ChunkService::PatchChunkRanges(id, from_version, to_version, length,
                                          ranges, bytes);
  }
  ChunkWriteOp op;
  op.kind = ChunkWriteOp::Kind::kPatch;
  op.id = id;
  op.from_version = from_version;
  op.to_version = to_version;
  op.length = length;
  op.bytes = bytes;
  op.ranges = ranges;
  Status result;
  Status st = SendApplyRequest(std::span<const ChunkWriteOp>(&op, 1),
                               std::span<Status>(&result, 1));
  if (st.code() == EOPNOTSUPP) {
    // An older chunkd: read the whole source, write the whole result.
    return ChunkService::PatchChunkRanges(id, from_version, to_version, length,
                                          ranges, bytes);
  }
  return st.ok() ? result : st;
}

std::vector<Status> RemoteChunkService::ApplyChunkOps(
    std::span<const ChunkWriteOp> ops) {
  std::vector<Status> out(ops.size());
  // One op: its own message (no copy of its bytes into a batch frame).
  if (ops.size() == 1) {
    out[0] = ApplyChunkOp(ops[0]);
    return out;
  }
  size_t at = 0;
  while (at < ops.size()) {
    // The next request: as many ops as fit (at least one).
    size_t end = at;
    uint64_t bulk_size = 0;
    size_t range_count = 0;
    Inodes inodes;  // at most kMaxGrantsPerCall files per request
    while (end < ops.size() && end - at < kMaxChunkOpsPerRequest &&
           (end == at || (bulk_size + ops[end].bytes.size() <= kMaxBulk &&
                          range_count + ops[end].ranges.size() <=
                              kMaxPatchRangesPerRequest &&
                          inodes.Fits(ops[end].id.inode)))) {
      bulk_size += ops[end].bytes.size();
      range_count += ops[end].ranges.size();
      inodes.Add(ops[end].id.inode);
      ++end;
    }
    if (bulk_size > kMaxBulk || range_count > kMaxPatchRangesPerRequest) {
      // One op alone is too big: a multi-range patch goes on its own
      // (PatchChunkRanges falls back to a whole rewrite).
      out[at] = ops[at].ranges.empty()
                    ? Status::InvalidArgument(
                          "chunk op of " + std::to_string(bulk_size) +
                          " bytes exceeds the wire limit of " +
                          std::to_string(kMaxBulk))
                    : ApplyChunkOp(ops[at]);
      at = end;
      continue;
    }
    const auto batch = ops.subspan(at, end - at);
    Status st =
        SendApplyRequest(batch, std::span<Status>(out).subspan(at, end - at));
    if (st.code() == EOPNOTSUPP) {
      // An older chunkd: the message is unknown there.
      auto one_by_one = ChunkService::ApplyChunkOps(batch);
      std::move(one_by_one.begin(), one_by_one.end(), out.begin() + at);
    } else if (!st.ok()) {
      for (size_t i = at; i < end; ++i) out[i] = st;
    }
    at = end;
  }
  return out;
}

}  // namespace stripefs::rpc

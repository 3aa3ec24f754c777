#include "backend/rpc/remote_chunk_service.h"

#include <algorithm>
#include <exception>

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
                                       std::chrono::milliseconds read_timeout)
    : client_(std::move(address), std::move(key), std::move(options)),
      read_timeout_(read_timeout) {}

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
  Msg<MsgType::kWriteChunk>::Response resp;
  return CallTyped<MsgType::kWriteChunk>(client_, {id, version}, &resp, data);
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
  Msg<MsgType::kReadChunk>::Response resp;
  AlignedBytes none;
  Status s = CallTyped<MsgType::kReadChunk>(
      client_, {id, version, offset, length}, &resp, {}, &none, read_timeout_);
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
  Msg<MsgType::kReadChunk>::Response resp;
  return CallTypedInto<MsgType::kReadChunk>(
      client_, {id, version, offset, static_cast<uint32_t>(out.size())}, &resp,
      out, deadline);
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
  Msg<MsgType::kDeleteChunkVersion>::Response resp;
  return CallTyped<MsgType::kDeleteChunkVersion>(client_, {id, version}, &resp);
}

Status RemoteChunkService::DeleteChunkVersions(
    std::span<const ChunkVersion> chunks) {
  for (size_t at = 0; at < chunks.size(); at += kMaxChunkVersionsPerDelete) {
    const auto part = chunks.subspan(
        at, std::min(kMaxChunkVersionsPerDelete, chunks.size() - at));
    Msg<MsgType::kDeleteChunkVersions>::Response resp;
    Status st = CallTyped<MsgType::kDeleteChunkVersions>(
        client_, {std::vector<ChunkVersion>(part.begin(), part.end())}, &resp);
    // An older chunkd: the message is unknown there.
    if (st.code() == EOPNOTSUPP) st = ChunkService::DeleteChunkVersions(part);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status RemoteChunkService::CloneChunk(const ChunkId& id, uint64_t from_version,
                                      uint64_t to_version, uint32_t length) {
  Msg<MsgType::kCloneChunk>::Response resp;
  return CallTyped<MsgType::kCloneChunk>(
      client_, {id, from_version, to_version, length}, &resp);
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
  Msg<MsgType::kPatchChunk>::Response resp;
  return CallTyped<MsgType::kPatchChunk>(
      client_, {id, from_version, to_version, length, offset}, &resp, bytes);
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
    while (end < ops.size() && end - at < kMaxChunkOpsPerRequest &&
           (end == at || bulk_size + ops[end].bytes.size() <= kMaxBulk)) {
      bulk_size += ops[end].bytes.size();
      ++end;
    }
    if (bulk_size > kMaxBulk) {  // one op alone is too big
      out[at] = Status::InvalidArgument(
          "chunk op of " + std::to_string(bulk_size) +
          " bytes exceeds the wire limit of " + std::to_string(kMaxBulk));
      at = end;
      continue;
    }
    std::vector<ChunkOpHeader> headers;
    headers.reserve(end - at);
    std::vector<uint8_t> bulk;
    bulk.reserve(bulk_size);
    for (size_t i = at; i < end; ++i) {
      const ChunkWriteOp& op = ops[i];
      headers.push_back({static_cast<uint32_t>(op.kind), op.id, op.from_version,
                         op.to_version, op.length, op.offset,
                         static_cast<uint32_t>(op.bytes.size())});
      bulk.insert(bulk.end(), op.bytes.begin(), op.bytes.end());
    }
    Msg<MsgType::kApplyChunkOps>::Response resp;
    Status st = CallTyped<MsgType::kApplyChunkOps>(
        client_, {std::move(headers)}, &resp, bulk);
    const auto& codes = std::get<0>(resp);
    const auto& messages = std::get<1>(resp);
    if (st.code() == EOPNOTSUPP) {
      // An older chunkd: the message is unknown there.
      auto one_by_one = ChunkService::ApplyChunkOps(ops.subspan(at, end - at));
      std::move(one_by_one.begin(), one_by_one.end(), out.begin() + at);
    } else if (!st.ok()) {
      for (size_t i = at; i < end; ++i) out[i] = st;
    } else if (codes.size() != end - at || messages.size() != end - at) {
      const Status bad(EPROTO, "chunkd at " + client_.address() + " answered " +
                                   std::to_string(codes.size()) +
                                   " statuses for " + std::to_string(end - at) +
                                   " chunk ops");
      for (size_t i = at; i < end; ++i) out[i] = bad;
    } else {
      for (size_t i = at; i < end; ++i) {
        const int32_t code = codes[i - at];
        if (code == 0) continue;
        out[i] = code > 0 && code < 4096
                     ? Status(code, messages[i - at])
                     : Status(EPROTO, "chunkd at " + client_.address() +
                                          " answered error code " +
                                          std::to_string(code));
      }
    }
    at = end;
  }
  return out;
}

// ---- server
// -------------------------------------------------------------------

ChunkServiceServer::ChunkServiceServer(ChunkService* service)
    : service_(service) {
  for (int shift = kMinReadShift; shift <= kMaxReadShift; ++shift) {
    const size_t size = size_t{1} << shift;
    read_pools_.emplace_back(
        size, std::clamp<size_t>((size_t{4} << 20) / size, 2, 16));
  }
}

std::span<uint8_t> ChunkServiceServer::ReplyBuffer(size_t length,
                                                   RpcReply* reply) {
  int shift = kMinReadShift;
  while (shift <= kMaxReadShift && (size_t{1} << shift) < length) ++shift;
  if (shift > kMaxReadShift) {
    reply->bulk_storage.resize(length);  // not zero-filled (AlignedBytes)
    return reply->bulk_storage;
  }
  reply->bulk_lease = read_pools_[shift - kMinReadShift].Get();
  return reply->bulk_lease.span().first(length);
}

void ChunkServiceServer::Handle(uint16_t type, std::span<const uint8_t> p,
                                AlignedBytes& bulk, RpcReply* reply) {
  ChunkService& s = *service_;
  try {
    switch (static_cast<MsgType>(type)) {
      case MsgType::kWriteChunk:
        return ServeTyped<MsgType::kWriteChunk>(
            p, reply, [&](auto&, auto& id, auto version) {
              return s.WriteChunk(id, version, bulk);
            });
      case MsgType::kReadChunk:
        return ServeTyped<MsgType::kReadChunk>(
            p, reply,
            [&](auto&, auto& id, auto version, auto offset,
                auto length) -> Status {
              // Straight into the buffer the reply is sent from.
              std::span<uint8_t> out = ReplyBuffer(length, reply);
              STRIPEFS_RETURN_IF_ERROR(
                  s.ReadChunkInto(id, version, offset, out));
              reply->bulk = out;
              return Status::Ok();
            });
      case MsgType::kDeleteChunk:
        return ServeTyped<MsgType::kDeleteChunk>(
            p, reply, [&](auto&, auto& id, auto keep) {
              return s.DeleteChunk(id, keep);
            });
      case MsgType::kListChunks:
        return ServeTyped<MsgType::kListChunks>(
            p, reply, [&](auto& out, auto& after, auto limit) -> Status {
              auto r = s.ListChunks(after, limit);
              if (!r.ok()) return r.status();
              std::get<0>(out) = std::move(r).value();
              return Status::Ok();
            });
      case MsgType::kChunkStats:
        return ServeTyped<MsgType::kChunkStats>(p, reply,
                                                [&](auto& out) -> Status {
                                                  auto r = s.Stats();
                                                  if (!r.ok())
                                                    return r.status();
                                                  std::get<0>(out) = *r;
                                                  return Status::Ok();
                                                });
      case MsgType::kDeleteChunkVersion:
        return ServeTyped<MsgType::kDeleteChunkVersion>(
            p, reply, [&](auto&, auto& id, auto version) {
              return s.DeleteChunkVersion(id, version);
            });
      case MsgType::kDeleteChunkVersions:
        return ServeTyped<MsgType::kDeleteChunkVersions>(
            p, reply,
            [&](auto&, auto& chunks) { return s.DeleteChunkVersions(chunks); });
      case MsgType::kCloneChunk:
        return ServeTyped<MsgType::kCloneChunk>(
            p, reply, [&](auto&, auto& id, auto from, auto to, auto length) {
              return s.CloneChunk(id, from, to, length);
            });
      case MsgType::kPatchChunk:
        return ServeTyped<MsgType::kPatchChunk>(
            p, reply,
            [&](auto&, auto& id, auto from, auto to, auto length, auto offset) {
              return s.PatchChunk(id, from, to, length, offset, bulk);
            });
      case MsgType::kApplyChunkOps:
        return ServeTyped<MsgType::kApplyChunkOps>(
            p, reply, [&](auto& out, auto& headers) -> Status {
              // Each op's bytes are the next `size` bytes of the bulk.
              std::vector<ChunkWriteOp> ops;
              ops.reserve(headers.size());
              uint64_t used = 0;
              for (const ChunkOpHeader& h : headers) {
                if (h.kind > static_cast<uint32_t>(ChunkWriteOp::Kind::kPatch))
                  return Status(EPROTO, "unknown chunk op kind " +
                                            std::to_string(h.kind));
                if (h.size > bulk.size() - used)
                  return Status(EPROTO, "chunk ops name more bytes than the " +
                                            std::to_string(bulk.size()) +
                                            " the request carries");
                ChunkWriteOp op;
                op.kind = static_cast<ChunkWriteOp::Kind>(h.kind);
                op.id = h.id;
                op.from_version = h.from_version;
                op.to_version = h.to_version;
                op.length = h.length;
                op.offset = h.offset;
                op.bytes = std::span<const uint8_t>(bulk).subspan(used, h.size);
                used += h.size;
                ops.push_back(op);
              }
              if (used != bulk.size())
                return Status(EPROTO, "chunk ops name " + std::to_string(used) +
                                          " bytes, the request carries " +
                                          std::to_string(bulk.size()));
              // The ops run concurrently: two writing one (id, version)
              // would race in the store, so such a request is refused whole.
              std::vector<std::pair<ChunkId, uint64_t>> targets;
              targets.reserve(ops.size());
              for (const ChunkWriteOp& op : ops)
                targets.emplace_back(op.id, op.to_version);
              std::sort(targets.begin(), targets.end());
              auto twice = std::adjacent_find(targets.begin(), targets.end());
              if (twice != targets.end())
                return Status::InvalidArgument(
                    "chunk ops write chunk " + std::to_string(twice->first.inode) +
                    "/" + std::to_string(twice->first.stripe) + "/" +
                    std::to_string(twice->first.index) + " version " +
                    std::to_string(twice->second) + " twice in one request");
              std::vector<Status> results = s.ApplyChunkOps(ops);
              auto& codes = std::get<0>(out);
              auto& messages = std::get<1>(out);
              for (const Status& r : results) {
                codes.push_back(r.ok() ? 0 : r.code());
                messages.push_back(r.ok() ? std::string() : r.message());
              }
              return Status::Ok();
            });
      default:
        break;
    }
    const char* name = MsgTypeName(type);
    reply->payload = EncodeErrorResponse(Status::NotSupported(
        std::string("chunkd does not serve ") +
        (name ? std::string(name) : "message type " + std::to_string(type)) +
        " (wrong address: is this metad?)"));
  } catch (const std::exception& e) {
    reply->payload = EncodeErrorResponse(
        Status::IoError(std::string("chunkd internal error: ") + e.what()));
  }
  reply->bulk = {};
  reply->bulk_storage.clear();
  reply->bulk_lease.reset();
}

}  // namespace stripefs::rpc

#include "backend/rpc/chunk_service_server.h"

#include <algorithm>
#include <string>

#include "backend/rpc/dispatch_table.h"
#include "backend/rpc/typed_call.h"

namespace stripefs::rpc {

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

// The handlers of the dispatch table below: one per message, each decoding
// its wire struct and calling the service.
struct ChunkServiceServer::Rows {
  static void WriteChunk(ChunkServiceServer& m, const RpcCall& c) {
    AlignedBytes& bulk = c.bulk;
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kWriteChunk>(
        c.payload, c.reply, [&](auto&, auto& id, auto version) -> Status {
          STRIPEFS_RETURN_IF_ERROR(m.Covered(c, id, kGrantWrite));
          return s.WriteChunk(id, version, bulk);
        });
  }

  static void ReadChunk(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    RpcReply* reply = c.reply;
    ServeTyped<MsgType::kReadChunk>(
        c.payload, c.reply,
        [&](auto&, auto& id, auto version, auto offset, auto length) -> Status {
          STRIPEFS_RETURN_IF_ERROR(m.Covered(c, id, kGrantRead));
          // The limit holds before anything is sized by the request.
          if (length > kMaxBulk)
            return Status(EPROTO, "chunk read of " + std::to_string(length) +
                                      " bytes in one request, at most " +
                                      std::to_string(kMaxBulk));
          // Straight into the buffer the reply is sent from.
          std::span<uint8_t> out = m.ReplyBuffer(length, reply);
          STRIPEFS_RETURN_IF_ERROR(s.ReadChunkInto(id, version, offset, out));
          reply->bulk = out;
          return Status::Ok();
        });
  }

  static void ReadChunkRanges(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    RpcReply* reply = c.reply;
    ServeTyped<MsgType::kReadChunkRanges>(
        c.payload, c.reply, [&](auto& out, auto& headers) -> Status {
          // The limits hold before anything is sized by the request.
          if (headers.size() > kMaxChunkReadsPerRequest)
            return Status(EPROTO, std::to_string(headers.size()) +
                                      " chunk reads in one request, at most " +
                                      std::to_string(kMaxChunkReadsPerRequest));
          uint64_t total = 0;
          for (const ChunkReadHeader& h : headers) {
            STRIPEFS_RETURN_IF_ERROR(m.Covered(c, h.id, kGrantRead));
            total += h.length;
          }
          if (total > kMaxBulk)
            return Status(EPROTO, "chunk reads of " + std::to_string(total) +
                                      " bytes in one request, at most " +
                                      std::to_string(kMaxBulk));
          // Every read into its place in the reply buffer; the OK
          // ones are then packed back to back (the bulk's layout).
          std::span<uint8_t> buf = m.ReplyBuffer(total, reply);
          std::vector<ChunkRangeRead> reads;
          reads.reserve(headers.size());
          uint64_t at = 0;
          for (const ChunkReadHeader& h : headers) {
            reads.push_back(
                {h.id, h.version, h.offset, buf.subspan(at, h.length)});
            at += h.length;
          }
          std::vector<Status> results =
              s.ReadChunkRanges(reads, Deadline::max());
          auto& codes = std::get<0>(out);
          auto& messages = std::get<1>(out);
          uint64_t packed = 0;
          for (size_t i = 0; i < reads.size(); ++i) {
            const Status& r = results[i];
            codes.push_back(r.ok() ? 0 : r.code());
            messages.push_back(r.ok() ? std::string() : r.message());
            if (!r.ok()) continue;
            if (reads[i].out.data() != buf.data() + packed)
              std::memmove(buf.data() + packed, reads[i].out.data(),
                           reads[i].out.size());
            packed += reads[i].out.size();
          }
          reply->bulk = buf.first(packed);
          return Status::Ok();
        });
  }

  static void DeleteChunk(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kDeleteChunk>(
        c.payload, c.reply,
        [&](auto&, auto& id, auto keep) { return s.DeleteChunk(id, keep); });
  }

  static void ListChunks(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kListChunks>(
        c.payload, c.reply, [&](auto& out, auto& after, auto limit) -> Status {
          auto r = s.ListChunks(after, limit);
          if (!r.ok()) return r.status();
          std::get<0>(out) = std::move(r).value();
          return Status::Ok();
        });
  }

  static void ChunkStats(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kChunkStats>(c.payload, c.reply,
                                     [&](auto& out) -> Status {
                                       auto r = s.Stats();
                                       if (!r.ok()) return r.status();
                                       std::get<0>(out) = *r;
                                       return Status::Ok();
                                     });
  }

  static void DeleteChunkVersion(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kDeleteChunkVersion>(
        c.payload, c.reply, [&](auto&, auto& id, auto version) -> Status {
          STRIPEFS_RETURN_IF_ERROR(m.Covered(c, id, kGrantWrite));
          return s.DeleteChunkVersion(id, version);
        });
  }

  static void DeleteChunkVersions(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kDeleteChunkVersions>(
        c.payload, c.reply, [&](auto&, auto& chunks) -> Status {
          for (const ChunkVersion& v : chunks)
            STRIPEFS_RETURN_IF_ERROR(m.Covered(c, v.id, kGrantWrite));
          return s.DeleteChunkVersions(chunks);
        });
  }

  static void CloneChunk(ChunkServiceServer& m, const RpcCall& c) {
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kCloneChunk>(
        c.payload, c.reply,
        [&](auto&, auto& id, auto from, auto to, auto length) -> Status {
          STRIPEFS_RETURN_IF_ERROR(m.Covered(c, id, kGrantWrite));
          return s.CloneChunk(id, from, to, length);
        });
  }

  static void PatchChunk(ChunkServiceServer& m, const RpcCall& c) {
    AlignedBytes& bulk = c.bulk;
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kPatchChunk>(
        c.payload, c.reply,
        [&](auto&, auto& id, auto from, auto to, auto length,
            auto offset) -> Status {
          STRIPEFS_RETURN_IF_ERROR(m.Covered(c, id, kGrantWrite));
          return s.PatchChunk(id, from, to, length, offset, bulk);
        });
  }

  static void ApplyChunkOps(ChunkServiceServer& m, const RpcCall& c) {
    AlignedBytes& bulk = c.bulk;
    ChunkService& s = *m.service_;
    ServeTyped<MsgType::kApplyChunkOps>(
        c.payload, c.reply,
        [&](auto& out, auto& headers, auto& ranges) -> Status {
          // Each op's bytes are the next `size` bytes of the bulk, a
          // multi-range patch's ranges the next `range_count` ranges.
          // The lists' limits hold before anything is sized by them.
          if (headers.size() > kMaxChunkOpsPerRequest)
            return Status(EPROTO, std::to_string(headers.size()) +
                                      " chunk ops in one request, at most " +
                                      std::to_string(kMaxChunkOpsPerRequest));
          if (ranges.size() > kMaxPatchRangesPerRequest)
            return Status(EPROTO,
                          std::to_string(ranges.size()) +
                              " patch ranges in one request, at most " +
                              std::to_string(kMaxPatchRangesPerRequest));
          // Every op's chunk is granted, or none runs.
          for (const ChunkOpHeader& h : headers)
            STRIPEFS_RETURN_IF_ERROR(m.Covered(c, h.id, kGrantWrite));
          std::vector<ChunkWriteOp> ops;
          ops.reserve(headers.size());
          uint64_t used = 0;
          size_t ranges_used = 0;
          for (const ChunkOpHeader& h : headers) {
            if (h.kind > static_cast<uint32_t>(ChunkWriteOp::Kind::kPatch))
              return Status(EPROTO,
                            "unknown chunk op kind " + std::to_string(h.kind));
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
            if (h.range_count > 0) {
              if (h.kind != static_cast<uint32_t>(ChunkWriteOp::Kind::kPatch))
                return Status(EPROTO, "chunk op of kind " +
                                          std::to_string(h.kind) +
                                          " has patch ranges");
              if (h.range_count > ranges.size() - ranges_used)
                return Status(EPROTO,
                              "chunk ops name more patch ranges than "
                              "the " +
                                  std::to_string(ranges.size()) +
                                  " the request carries");
              op.ranges = std::span<const PatchRange>(ranges).subspan(
                  ranges_used, h.range_count);
              ranges_used += h.range_count;
              Status bad = CheckPatchRanges(op.ranges, h.length, h.size);
              if (!bad.ok())
                return Status(EPROTO, "chunk op " + std::to_string(ops.size()) +
                                          ": " + bad.message());
            }
            ops.push_back(op);
          }
          if (used != bulk.size())
            return Status(EPROTO, "chunk ops name " + std::to_string(used) +
                                      " bytes, the request carries " +
                                      std::to_string(bulk.size()));
          if (ranges_used != ranges.size())
            return Status(EPROTO, "chunk ops name " +
                                      std::to_string(ranges_used) +
                                      " patch ranges, the request "
                                      "carries " +
                                      std::to_string(ranges.size()));
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
  }

  static void RevokeGrants(ChunkServiceServer& m, const RpcCall& c) {
    ServeTyped<MsgType::kRevokeGrants>(
        c.payload, c.reply, [&](auto&, auto& entity, auto& salt) -> Status {
          STRIPEFS_RETURN_IF_ERROR(ParseEntity(entity).status());
          if (salt.size() != kEntitySaltSize)
            return Status::InvalidArgument(
                "identity salt of " + std::to_string(salt.size()) +
                " bytes, not " + std::to_string(kEntitySaltSize));
          EntitySalt sv{};
          std::copy(salt.begin(), salt.end(), sv.begin());
          m.Revoke(entity, sv);
          return Status::Ok();
        });
  }
};

namespace {

constexpr bool kMutates = true, kReads = false;

// clang-format off
constexpr RpcRow<ChunkServiceServer> kChunkRows[] = {
  {MsgType::kWriteChunk, ChunkServiceServer::Rows::WriteChunk, kMutates, kAnyone},
  {MsgType::kReadChunk, ChunkServiceServer::Rows::ReadChunk, kReads, kAnyone},
  {MsgType::kReadChunkRanges, ChunkServiceServer::Rows::ReadChunkRanges, kReads, kAnyone},
  {MsgType::kDeleteChunk, ChunkServiceServer::Rows::DeleteChunk, kMutates, kOperators},
  {MsgType::kListChunks, ChunkServiceServer::Rows::ListChunks, kReads, kOperators},
  {MsgType::kChunkStats, ChunkServiceServer::Rows::ChunkStats, kReads, kAnyone},
  {MsgType::kDeleteChunkVersion, ChunkServiceServer::Rows::DeleteChunkVersion, kMutates, kAnyone},
  {MsgType::kDeleteChunkVersions, ChunkServiceServer::Rows::DeleteChunkVersions, kMutates, kAnyone},
  {MsgType::kCloneChunk, ChunkServiceServer::Rows::CloneChunk, kMutates, kAnyone},
  {MsgType::kPatchChunk, ChunkServiceServer::Rows::PatchChunk, kMutates, kAnyone},
  {MsgType::kApplyChunkOps, ChunkServiceServer::Rows::ApplyChunkOps, kMutates, kAnyone},
  {MsgType::kRevokeGrants, ChunkServiceServer::Rows::RevokeGrants, kMutates, kOperators},
};
// clang-format on
static_assert(RowsUnique(kChunkRows));

// The messages that read or change chunk data: a client sends them under
// grants. (DeleteChunk and ListChunks are the operators' alone; ChunkStats
// and Ping touch no chunk.)
constexpr bool NeedsGrant(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kWriteChunk:
    case MsgType::kReadChunk:
    case MsgType::kReadChunkRanges:
    case MsgType::kDeleteChunkVersion:
    case MsgType::kDeleteChunkVersions:
    case MsgType::kCloneChunk:
    case MsgType::kPatchChunk:
    case MsgType::kApplyChunkOps:
      return true;
    default:
      return false;
  }
}

std::string Named(uint16_t type) {
  const char* name = MsgTypeName(type);
  return name ? name : "message type " + std::to_string(type);
}

}  // namespace

void ChunkServiceServer::RequireGrants(GrantKey key,
                                       std::function<uint64_t()> now_ms) {
  grant_key_.emplace(std::move(key));
  now_ms_ = std::move(now_ms);
}

void ChunkServiceServer::Revoke(const std::string& entity,
                                const EntitySalt& salt) {
  const uint64_t now = now_ms_ ? now_ms_() : UnixMillis();
  {
    MutexLock l(&revoked_mu_);
    // Entries older than any grant issued before them are of no use.
    const uint64_t keep = kGrantLifetimeMs + 2 * kGrantClockSlackMs;
    std::erase_if(revoked_,
                  [&](const auto& e) { return e.second + keep < now; });
    revoked_[{entity, salt}] = now;
    any_revoked_.store(true, std::memory_order_release);
  }
  if (on_revoked_) on_revoked_(entity);
}

Status ChunkServiceServer::CheckGrants(const Caller& caller,
                                       const GrantedCall& call) {
  const uint64_t now = now_ms_();
  for (size_t i = 0; i < call.count; ++i) {
    const ChunkGrant& g = call.grants[i];
    if (!grant_key_->Verify(g, caller))
      return Status(EKEYREJECTED,
                    "chunk grant " + std::to_string(i) + " (inode " +
                        std::to_string(g.inode) + ") does not verify for " +
                        caller.entity + " on volume " +
                        VolumeIdHex(grant_key_->volume()) +
                        " (forged, altered, or metad gave it to another "
                        "identity or volume)");
    if (now > g.expires_ms + kGrantClockSlackMs)
      return Status(EKEYEXPIRED,
                    "chunk grant for inode " + std::to_string(g.inode) +
                        " of " + caller.entity + " expired " +
                        std::to_string(now - g.expires_ms) +
                        " ms ago by chunkd's clock (ask metad again; clocks "
                        "more than " +
                        std::to_string(kGrantClockSlackMs / 1000) +
                        " s apart refuse every grant)");
  }
  if (any_revoked_.load(std::memory_order_acquire)) {
    MutexLock l(&revoked_mu_);
    if (revoked_.count({caller.entity, caller.salt}))
      return Status(EKEYREVOKED, caller.entity +
                                     " was removed (stripefs auth rm): its "
                                     "chunk grants are void");
  }
  grants_verified_.fetch_add(call.count, std::memory_order_relaxed);
  return Status::Ok();
}

Status ChunkServiceServer::Covered(const RpcCall& c, const ChunkId& id,
                                   uint8_t op) {
  if (c.granted == nullptr) return Status::Ok();
  for (size_t i = 0; i < c.granted->count; ++i)
    if (c.granted->grants[i].Covers(id, op)) return Status::Ok();
  grants_refused_.fetch_add(1, std::memory_order_relaxed);
  return Status(EACCES,
                "chunk " + std::to_string(id.inode) + "/" +
                    std::to_string(id.stripe) + "/" + std::to_string(id.index) +
                    " (" + (op == kGrantRead ? "read" : "write") +
                    ") is not covered by the grants " + c.caller.entity +
                    " sent (metad grants a client the files it may "
                    "reach)");
}

void ChunkServiceServer::Handle(const Caller& caller, uint16_t type,
                                std::span<const uint8_t> payload,
                                AlignedBytes& bulk, RpcReply* reply) {
  const bool checked =
      grant_key_.has_value() && caller.principal == Principal::kClient;
  if (type == kGrantedCallType) {
    // Decoded in place and checked before the inner request is decoded
    // (nothing is allocated for a request that does not verify).
    GrantedCall call;
    if (!DecodeGrantedCall(payload, &call)) {
      reply->payload = EncodeErrorResponse(
          Status(EPROTO,
                 "malformed GrantedCall request (different stripefs "
                 "versions?)"));
      return;
    }
    if (!NeedsGrant(call.inner_type)) {
      reply->payload = EncodeErrorResponse(Status(
          EPROTO, "a GrantedCall carries chunk data requests only, not " +
                      Named(call.inner_type)));
      return;
    }
    if (checked) {
      Status st = CheckGrants(caller, call);
      if (!st.ok()) {
        grants_refused_.fetch_add(1, std::memory_order_relaxed);
        reply->payload = EncodeErrorResponse(st);
        return;
      }
    }
    Dispatch(kChunkRows, *this, "chunkd", "wrong address: is this metad?",
             RpcCall{caller, call.inner_payload, bulk, reply,
                     checked ? &call : nullptr},
             call.inner_type);
    return;
  }
  if (checked && NeedsGrant(type)) {
    grants_refused_.fetch_add(1, std::memory_order_relaxed);
    reply->payload = EncodeErrorResponse(
        Status(EACCES, Named(type) + " from " + caller.entity +
                           " carries no chunk grant (a client asks metad "
                           "for grants: GrantChunks; run the same stripefs "
                           "version everywhere)"));
    return;
  }
  Dispatch(kChunkRows, *this, "chunkd", "wrong address: is this metad?",
           RpcCall{caller, payload, bulk, reply}, type);
}

}  // namespace stripefs::rpc

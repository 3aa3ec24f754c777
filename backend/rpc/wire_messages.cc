#include "backend/rpc/wire_messages.h"

#include <algorithm>
#include <cstdlib>

#include "backend/rpc/chunk_grant.h"

namespace stripefs::rpc {

const char* MsgTypeName(uint16_t type) {
  switch (type) {
#define STRIPEFS_X(name, num, idem) \
  case num:                         \
    return #name;
    STRIPEFS_RPC_MESSAGES(STRIPEFS_X)
#undef STRIPEFS_X
    case kGrantedCallType:
      return "GrantedCall";
  }
  return nullptr;
}

bool MsgTypeIdempotent(uint16_t type) {
  switch (type) {
#define STRIPEFS_X(name, num, idem) \
  case num:                         \
    return idem;
    STRIPEFS_RPC_MESSAGES(STRIPEFS_X)
#undef STRIPEFS_X
    case kGrantedCallType:
      return true;  // carries only chunk messages, all idempotent
  }
  return false;
}

const std::vector<MsgType>& AllMsgTypes() {
  static const std::vector<MsgType> all = {
#define STRIPEFS_X(name, num, idem) MsgType::k##name,
      STRIPEFS_RPC_MESSAGES(STRIPEFS_X)
#undef STRIPEFS_X
  };
  return all;
}

// ---- value codecs -----------------------------------------------------------
void Put(Encoder& e, const Geometry& v) {
  e.U32(v.k);
  e.U32(v.m);
  e.U32(v.cell_size);
}
bool Get(Decoder& d, Geometry* v) {
  return d.U32(&v->k) && d.U32(&v->m) && d.U32(&v->cell_size);
}

void Put(Encoder& e, const Timespec& v) {
  e.I64(v.sec);
  e.U32(v.nsec);
}
bool Get(Decoder& d, Timespec* v) { return d.I64(&v->sec) && d.U32(&v->nsec); }

void Put(Encoder& e, const InodeAttr& v) {
  e.U64(v.ino);
  e.U32(v.mode);
  e.U32(v.uid);
  e.U32(v.gid);
  e.U32(v.nlink);
  e.U64(v.size);
  e.U32(v.rdev);
  e.U64(v.generation);
  Put(e, v.atime);
  Put(e, v.mtime);
  Put(e, v.ctime);
}
bool Get(Decoder& d, InodeAttr* v) {
  return d.U64(&v->ino) && d.U32(&v->mode) && d.U32(&v->uid) &&
         d.U32(&v->gid) && d.U32(&v->nlink) && d.U64(&v->size) &&
         d.U32(&v->rdev) && d.U64(&v->generation) && Get(d, &v->atime) &&
         Get(d, &v->mtime) && Get(d, &v->ctime);
}

void Put(Encoder& e, const SetAttrRequest& v) {
  e.U32(v.mask);
  e.U32(v.mode);
  e.U32(v.uid);
  e.U32(v.gid);
  e.U64(v.size);
  Put(e, v.atime);
  Put(e, v.mtime);
  Put(e, v.ctime);
}
bool Get(Decoder& d, SetAttrRequest* v) {
  return d.U32(&v->mask) && d.U32(&v->mode) && d.U32(&v->uid) &&
         d.U32(&v->gid) && d.U64(&v->size) && Get(d, &v->atime) &&
         Get(d, &v->mtime) && Get(d, &v->ctime);
}

void Put(Encoder& e, const DirEntry& v) {
  e.String(v.name);
  e.U64(v.ino);
  e.U32(v.mode);
  e.U64(v.cookie);
}
bool Get(Decoder& d, DirEntry* v) {
  return d.String(&v->name) && d.U64(&v->ino) && d.U32(&v->mode) &&
         d.U64(&v->cookie);
}

void Put(Encoder& e, const StripeVersion& v) {
  e.U64(v.stripe);
  e.U64(v.version);
  e.U32(v.missing_mask);
  e.U32(v.chunk_len);
}
bool Get(Decoder& d, StripeVersion* v) {
  return d.U64(&v->stripe) && d.U64(&v->version) && d.U32(&v->missing_mask) &&
         d.U32(&v->chunk_len);
}

void Put(Encoder& e, const ObsoleteStripe& v) {
  e.U64(v.inode);
  e.U64(v.stripe);
  e.U64(v.version);
}
bool Get(Decoder& d, ObsoleteStripe* v) {
  return d.U64(&v->inode) && d.U64(&v->stripe) && d.U64(&v->version);
}

void Put(Encoder& e, const StripeCommit& v) {
  Put(e, v.sv);
  e.U64(v.expected_version);
}
bool Get(Decoder& d, StripeCommit* v) {
  return Get(d, &v->sv) && d.U64(&v->expected_version);
}

void Put(Encoder& e, ServerState v) { e.U8(static_cast<uint8_t>(v)); }
bool Get(Decoder& d, ServerState* v) {
  uint8_t b;
  if (!d.U8(&b)) return false;
  if (b > static_cast<uint8_t>(ServerState::kOut)) return d.Fail();
  *v = static_cast<ServerState>(b);
  return true;
}

void Put(Encoder& e, const ServerInfo& v) {
  e.U32(v.id);
  e.String(v.address);
  e.String(v.failure_domain);
  Put(e, v.state);
  e.U32(v.weight);
}
bool Get(Decoder& d, ServerInfo* v) {
  return d.U32(&v->id) && d.String(&v->address) &&
         d.String(&v->failure_domain) && Get(d, &v->state) &&
         d.U32(&v->weight) && (v->weight <= kMaxServerWeight || d.Fail());
}

void Put(Encoder& e, const ClusterMap& v) {
  e.U64(v.epoch);
  Put(e, v.servers);
  e.U8(static_cast<uint8_t>(v.placement));
  e.U32(v.placement_groups);
}
bool Get(Decoder& d, ClusterMap* v) {
  uint8_t scheme = 0;
  if (!d.U64(&v->epoch) || !Get(d, &v->servers) || !d.U8(&scheme) ||
      !d.U32(&v->placement_groups)) {
    return false;
  }
  if (scheme > static_cast<uint8_t>(PlacementScheme::kBalanced))
    return d.Fail();
  v->placement = static_cast<PlacementScheme>(scheme);
  return true;
}

void Put(Encoder& e, const FsStats& v) {
  e.U64(v.inodes);
  e.U64(v.bytes_used);
}
bool Get(Decoder& d, FsStats* v) {
  return d.U64(&v->inodes) && d.U64(&v->bytes_used);
}

void Put(Encoder& e, const StripeRef& v) {
  e.U64(v.inode);
  Put(e, v.sv);
}
bool Get(Decoder& d, StripeRef* v) {
  return d.U64(&v->inode) && Get(d, &v->sv);
}

void Put(Encoder& e, const ChunkId& v) {
  e.U64(v.inode);
  e.U64(v.stripe);
  e.U32(v.index);
}
bool Get(Decoder& d, ChunkId* v) {
  return d.U64(&v->inode) && d.U64(&v->stripe) && d.U32(&v->index);
}

void Put(Encoder& e, const ChunkVersion& v) {
  Put(e, v.id);
  e.U64(v.version);
}
bool Get(Decoder& d, ChunkVersion* v) {
  return Get(d, &v->id) && d.U64(&v->version);
}

void Put(Encoder& e, const ChunkOpHeader& v) {
  e.U32(v.kind);
  Put(e, v.id);
  e.U64(v.from_version);
  e.U64(v.to_version);
  e.U32(v.length);
  e.U32(v.offset);
  e.U32(v.size);
  e.U32(v.range_count);
}
bool Get(Decoder& d, ChunkOpHeader* v) {
  return d.U32(&v->kind) && Get(d, &v->id) && d.U64(&v->from_version) &&
         d.U64(&v->to_version) && d.U32(&v->length) && d.U32(&v->offset) &&
         d.U32(&v->size) && d.U32(&v->range_count);
}

void Put(Encoder& e, const ChunkReadHeader& v) {
  Put(e, v.id);
  e.U64(v.version);
  e.U32(v.offset);
  e.U32(v.length);
}
bool Get(Decoder& d, ChunkReadHeader* v) {
  return Get(d, &v->id) && d.U64(&v->version) && d.U32(&v->offset) &&
         d.U32(&v->length);
}

void Put(Encoder& e, const PatchRange& v) {
  e.U32(v.offset);
  e.U32(v.length);
}
bool Get(Decoder& d, PatchRange* v) {
  return d.U32(&v->offset) && d.U32(&v->length);
}

void Put(Encoder& e, const ChunkInfo& v) {
  Put(e, v.id);
  e.U64(v.version);
  e.U32(v.length);
  e.U32(v.crc32c);
}
bool Get(Decoder& d, ChunkInfo* v) {
  return Get(d, &v->id) && d.U64(&v->version) && d.U32(&v->length) &&
         d.U32(&v->crc32c);
}

void Put(Encoder& e, const ChunkStoreStats& v) {
  e.U64(v.chunks);
  e.U64(v.bytes_stored);
  e.U64(v.bytes_free);
  e.U64(v.crc_errors);
  e.U64(v.writes);
  e.U64(v.reads);
  e.U64(v.bytes_capacity);
  e.U64(v.bytes_reserved);
  e.U64(v.fs_id);
}
bool Get(Decoder& d, ChunkStoreStats* v) {
  return d.U64(&v->chunks) && d.U64(&v->bytes_stored) &&
         d.U64(&v->bytes_free) && d.U64(&v->crc_errors) && d.U64(&v->writes) &&
         d.U64(&v->reads) && d.U64(&v->bytes_capacity) &&
         d.U64(&v->bytes_reserved) && d.U64(&v->fs_id);
}

void Put(Encoder& e, const RepairReport& v) {
  e.U64(v.stripes_total);
  e.U64(v.stripes_seen);
  e.U64(v.stripes_repaired);
  e.U64(v.stripes_failed);
  e.U64(v.stripes_unreachable);
  e.U64(v.chunks_rebuilt);
  e.U64(v.bytes_rebuilt);
  e.U64(v.elapsed_ms);
}
bool Get(Decoder& d, RepairReport* v) {
  return d.U64(&v->stripes_total) && d.U64(&v->stripes_seen) &&
         d.U64(&v->stripes_repaired) && d.U64(&v->stripes_failed) &&
         d.U64(&v->stripes_unreachable) && d.U64(&v->chunks_rebuilt) &&
         d.U64(&v->bytes_rebuilt) && d.U64(&v->elapsed_ms);
}

void Put(Encoder& e, const ClientRecord& v) {
  e.U64(v.id);
  e.String(v.kind);
  e.String(v.description);
  e.U32(v.lease_ms);
  e.Bool(v.finished);
  Put(e, v.repair);
  e.U64(v.age_ms);
}
bool Get(Decoder& d, ClientRecord* v) {
  return d.U64(&v->id) && d.String(&v->kind) && d.String(&v->description) &&
         d.U32(&v->lease_ms) && d.Bool(&v->finished) && Get(d, &v->repair) &&
         d.U64(&v->age_ms);
}

void Put(Encoder& e, const IdentityRecord& v) {
  e.String(v.entity);
  e.String(v.path);
  e.Bool(v.read_only);
}
bool Get(Decoder& d, IdentityRecord* v) {
  return d.String(&v->entity) && d.String(&v->path) && d.Bool(&v->read_only);
}

void PutStatus(Encoder& e, const Status& s) {
  e.I32(s.code());
  e.String(s.ok() ? std::string() : s.message());
}
bool GetStatus(Decoder& d, Status* s) {
  int32_t code;
  std::string msg;
  if (!d.I32(&code) || !d.String(&msg)) return false;
  if (code == 0) {
    if (!msg.empty()) return d.Fail();
    *s = Status::Ok();
    return true;
  }
  if (code < 0 || code > 4095) return d.Fail();
  *s = Status(code, std::move(msg));
  return true;
}

namespace {

template <MsgType T>
bool CheckOne(bool response, std::span<const uint8_t> in) {
  std::vector<uint8_t> again;
  if (response) {
    Status st;
    typename Msg<T>::Response r{};
    if (!DecodeResponse<T>(in, &st, &r)) return false;
    again = EncodeResponse<T>(st, r);
  } else {
    typename Msg<T>::Request r{};
    if (!DecodeRequest<T>(in, &r)) return false;
    again = EncodeRequest<T>(r);
  }
  if (again.size() != in.size() ||
      !std::equal(again.begin(), again.end(), in.begin())) {
    std::abort();  // non-canonical codec: a bug, make the fuzzer report it
  }
  return true;
}

}  // namespace

bool DecodePayloadChecked(uint16_t type, bool response,
                          std::span<const uint8_t> in) {
  if (type == kGrantedCallType) {
    GrantedCall call;
    if (response || !DecodeGrantedCall(in, &call)) return false;
    std::vector<EncodedGrant> grants;
    for (size_t i = 0; i < call.count; ++i)
      grants.push_back(EncodeGrant(call.grants[i]));
    std::vector<uint8_t> again = EncodeGrantedHead(call.inner_type, grants);
    again.insert(again.end(), call.inner_payload.begin(),
                 call.inner_payload.end());
    if (again.size() != in.size() ||
        !std::equal(again.begin(), again.end(), in.begin()))
      std::abort();
    // Nested GrantedCalls are not served; decode no deeper than one.
    return call.inner_type != kGrantedCallType &&
           DecodePayloadChecked(call.inner_type, false, call.inner_payload);
  }
  switch (type) {
#define STRIPEFS_X(name, num, idem) \
  case num:                         \
    return CheckOne<MsgType::k##name>(response, in);
    STRIPEFS_RPC_MESSAGES(STRIPEFS_X)
#undef STRIPEFS_X
  }
  return false;
}

}  // namespace stripefs::rpc

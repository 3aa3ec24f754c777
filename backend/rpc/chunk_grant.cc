#include "backend/rpc/chunk_grant.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/coding.h"

namespace stripefs::rpc {

namespace {

constexpr std::string_view kGrantLabel = "stripefs chunk grant";
constexpr std::string_view kGrantKeyInfo = "stripefs chunk grant key";

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

void EncodeBody(const ChunkGrant& g, uint8_t* p) {
  std::memset(p, 0, kChunkGrantBodySize);
  p[0] = kChunkGrantVersion;
  p[1] = g.ops;
  coding::StoreLe(p + 8, g.inode);
  coding::StoreLe(p + 16, g.first_stripe);
  coding::StoreLe(p + 24, g.last_stripe);
  coding::StoreLe(p + 32, g.issued_ms);
  coding::StoreLe(p + 40, g.expires_ms);
}

}  // namespace

EncodedGrant EncodeGrant(const ChunkGrant& g) {
  EncodedGrant out{};
  EncodeBody(g, out.data());
  std::memcpy(out.data() + kChunkGrantBodySize, g.mac.data(), kMacSize);
  return out;
}

bool DecodeGrant(std::span<const uint8_t> in, ChunkGrant* g) {
  if (in.size() != kChunkGrantSize) return false;
  const uint8_t* p = in.data();
  if (p[0] != kChunkGrantVersion) return false;
  if (p[1] == 0 || (p[1] & ~kGrantAllOps) != 0) return false;
  if (p[2] != 0 || p[3] != 0 || coding::LoadLe<uint32_t>(p + 4) != 0)
    return false;
  ChunkGrant out;
  out.ops = p[1];
  out.inode = coding::LoadLe<uint64_t>(p + 8);
  out.first_stripe = coding::LoadLe<uint64_t>(p + 16);
  out.last_stripe = coding::LoadLe<uint64_t>(p + 24);
  out.issued_ms = coding::LoadLe<uint64_t>(p + 32);
  out.expires_ms = coding::LoadLe<uint64_t>(p + 40);
  if (out.first_stripe > out.last_stripe) return false;
  std::memcpy(out.mac.data(), p + kChunkGrantBodySize, kMacSize);
  *g = out;
  return true;
}

bool DecodeGrantedCall(std::span<const uint8_t> in, GrantedCall* out) {
  if (in.size() < kGrantedCallHeadSize) return false;
  const size_t n = in[2];
  if (n == 0 || n > kMaxGrantsPerCall || in[3] != 0) return false;
  if (in.size() - kGrantedCallHeadSize < n * kChunkGrantSize) return false;
  out->inner_type = coding::LoadLe<uint16_t>(in.data());
  out->count = n;
  for (size_t i = 0; i < n; ++i) {
    if (!DecodeGrant(in.subspan(kGrantedCallHeadSize + i * kChunkGrantSize,
                                kChunkGrantSize),
                     &out->grants[i]))
      return false;
  }
  out->inner_payload = in.subspan(kGrantedCallHeadSize + n * kChunkGrantSize);
  return true;
}

std::vector<uint8_t> EncodeGrantedHead(uint16_t inner_type,
                                       std::span<const EncodedGrant> grants) {
  std::vector<uint8_t> out;
  out.reserve(kGrantedCallHeadSize + grants.size() * kChunkGrantSize);
  coding::PutLe(&out, inner_type);
  out.push_back(static_cast<uint8_t>(grants.size()));
  out.push_back(0);
  for (const EncodedGrant& g : grants)
    out.insert(out.end(), g.begin(), g.end());
  return out;
}

Result<GrantKey> GrantKey::Derive(const ClusterKey& server_key,
                                  const VolumeId& volume) {
  if (server_key.principal() != Principal::kServer)
    return Status(EPERM, "chunk grants need the server key, not " +
                             std::string(server_key.entity()));
  std::array<uint8_t, kClusterKeySize> bytes{};
  server_key.Derive(volume, kGrantKeyInfo, bytes);
  return GrantKey(ClusterKey::FromBytes(bytes), volume);
}

Mac GrantKey::Compute(const ChunkGrant& g, const Caller& who) const {
  uint8_t body[kChunkGrantBodySize];
  EncodeBody(g, body);
  std::array<uint8_t, kEntityNameMax> name{};
  std::memcpy(name.data(), who.entity.data(),
              std::min(who.entity.size(), name.size()));
  std::span<const uint8_t> parts[] = {Bytes(kGrantLabel), volume_, name,
                                      who.salt, body};
  return key_->Compute(parts);
}

void GrantKey::Sign(ChunkGrant* g, const Caller& who) const {
  g->mac = Compute(*g, who);
}

bool GrantKey::Verify(const ChunkGrant& g, const Caller& who) const {
  // A name longer than the field cannot have been granted (ParseEntity).
  if (who.entity.size() > kEntityNameMax) return false;
  return MacEqual(Compute(g, who), g.mac);
}

uint64_t UnixMillis() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
}

Result<EncodedGrant> ChunkGrantCache::Get(uint64_t inode, uint8_t ops) {
  const auto now = Clock::now();
  {
    MutexLock l(&mu_);
    auto it = entries_.find(inode);
    if (it != entries_.end() && (it->second.ops & ops) == ops &&
        now < it->second.renew_at)
      return it->second.grant;
  }
  // A writer asks for both: its reads of the file then need no other.
  const uint8_t want = (ops & kGrantWrite) ? kGrantAllOps : ops;
  fetches_.fetch_add(1, std::memory_order_relaxed);
  auto got = fetch_(inode, want);
  if (!got.ok()) return got.status();
  MutexLock l(&mu_);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_[inode] = {got->first, want,
                     now + std::chrono::milliseconds(got->second / 2)};
  return got->first;
}

void ChunkGrantCache::Invalidate(uint64_t inode) {
  MutexLock l(&mu_);
  entries_.erase(inode);
}

}  // namespace stripefs::rpc

// Test-only: deterministic, non-default sample values of every type that
// crosses the wire (so a dropped or swapped field shows up), and Wire(),
// the encoding of a value, to compare structs that have no operator==.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "backend/rpc/wire_messages.h"

namespace stripefs::testing {

struct Sampler {
  uint64_t n = 0;
  uint64_t Next() { return ++n * 0x9E3779B97F4A7C15ull; }

  void Fill(uint8_t& v) { v = static_cast<uint8_t>(Next() >> 56); }
  void Fill(uint32_t& v) { v = static_cast<uint32_t>(Next() >> 17); }
  void Fill(int32_t& v) { v = static_cast<int32_t>(Next() >> 33); }
  void Fill(uint64_t& v) { v = Next(); }
  void Fill(int64_t& v) { v = -static_cast<int64_t>(Next() >> 3); }
  void Fill(std::string& v) {
    v = "name-" + std::to_string(Next() % 1000);
    v.push_back('\0');
    v.push_back('\xff');
  }
  void Fill(ServerState& v) { v = static_cast<ServerState>(Next() % 3); }
  void Fill(Geometry& v) { Fill(v.k), Fill(v.m), Fill(v.cell_size); }
  void Fill(Timespec& v) { Fill(v.sec), Fill(v.nsec); }
  void Fill(InodeAttr& v) {
    Fill(v.ino), Fill(v.mode), Fill(v.uid), Fill(v.gid), Fill(v.nlink);
    Fill(v.size), Fill(v.rdev), Fill(v.generation), Fill(v.atime);
    Fill(v.mtime), Fill(v.ctime);
  }
  void Fill(SetAttrRequest& v) {
    Fill(v.mask), Fill(v.mode), Fill(v.uid), Fill(v.gid), Fill(v.size);
    Fill(v.atime), Fill(v.mtime), Fill(v.ctime);
  }
  void Fill(DirEntry& v) {
    Fill(v.name), Fill(v.ino), Fill(v.mode), Fill(v.cookie);
  }
  void Fill(StripeVersion& v) {
    Fill(v.stripe), Fill(v.version), Fill(v.missing_mask), Fill(v.chunk_len);
  }
  void Fill(StripeCommit& v) { Fill(v.sv), Fill(v.expected_version); }
  void Fill(ObsoleteStripe& v) {
    Fill(v.inode), Fill(v.stripe), Fill(v.version);
  }
  void Fill(ServerInfo& v) {
    Fill(v.id), Fill(v.address), Fill(v.failure_domain), Fill(v.state);
    v.weight = static_cast<uint32_t>(Next() % (kMaxServerWeight + 1));
  }
  void Fill(ClusterMap& v) {
    Fill(v.epoch), Fill(v.servers), Fill(v.placement_groups);
    v.placement = static_cast<PlacementScheme>(Next() % 2);
  }
  void Fill(FsStats& v) { Fill(v.inodes), Fill(v.bytes_used); }
  void Fill(StripeRef& v) { Fill(v.inode), Fill(v.sv); }
  void Fill(ChunkId& v) { Fill(v.inode), Fill(v.stripe), Fill(v.index); }
  void Fill(ChunkVersion& v) { Fill(v.id), Fill(v.version); }
  void Fill(rpc::ChunkOpHeader& v) {
    Fill(v.kind), Fill(v.id), Fill(v.from_version), Fill(v.to_version);
    Fill(v.length), Fill(v.offset), Fill(v.size), Fill(v.range_count);
  }
  void Fill(rpc::ChunkReadHeader& v) {
    Fill(v.id), Fill(v.version), Fill(v.offset), Fill(v.length);
  }
  void Fill(PatchRange& v) { Fill(v.offset), Fill(v.length); }
  void Fill(ChunkInfo& v) {
    Fill(v.id), Fill(v.version), Fill(v.length), Fill(v.crc32c);
  }
  void Fill(ChunkStoreStats& v) {
    Fill(v.chunks), Fill(v.bytes_stored), Fill(v.bytes_free);
    Fill(v.crc_errors), Fill(v.writes), Fill(v.reads);
    Fill(v.bytes_capacity), Fill(v.bytes_reserved), Fill(v.fs_id);
  }
  void Fill(bool& v) { v = Next() % 2 == 0; }
  void Fill(rpc::RepairReport& v) {
    Fill(v.stripes_total), Fill(v.stripes_seen), Fill(v.stripes_repaired);
    Fill(v.stripes_failed), Fill(v.stripes_unreachable);
    Fill(v.chunks_rebuilt), Fill(v.bytes_rebuilt);
    Fill(v.elapsed_ms);
  }
  void Fill(rpc::IdentityRecord& v) {
    Fill(v.entity), Fill(v.path), Fill(v.read_only);
  }
  void Fill(rpc::ClientRecord& v) {
    Fill(v.id), Fill(v.kind), Fill(v.description), Fill(v.lease_ms);
    Fill(v.finished), Fill(v.repair), Fill(v.age_ms);
  }
  template <typename T>
  void Fill(std::vector<T>& v) {
    v.resize(1 + Next() % 3);
    for (auto& x : v) Fill(x);
  }
  template <typename... T>
  void Fill(std::tuple<T...>& t) {
    std::apply([&](auto&... x) { (Fill(x), ...); }, t);
  }
  template <typename T>
  T Make() {
    T v{};
    Fill(v);
    return v;
  }
};

template <typename T>
std::vector<uint8_t> Wire(const T& v) {
  std::vector<uint8_t> out;
  rpc::Encoder e(&out);
  using rpc::Put;
  Put(e, v);
  return out;
}

}  // namespace stripefs::testing

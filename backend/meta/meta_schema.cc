#include "backend/meta/meta_schema.h"

#include <algorithm>
#include <cstring>

#include "common/coding.h"

namespace stripefs::meta_schema {
namespace {

// Little-endian value writer (record layouts in meta_schema.h).
class Writer {
 public:
  void U8(uint8_t v) { coding::PutLe(&out_, v); }
  void U32(uint32_t v) { coding::PutLe(&out_, v); }
  void U64(uint64_t v) { coding::PutLe(&out_, v); }
  void Time(const Timespec& t) {
    U64(static_cast<uint64_t>(t.sec));
    U32(t.nsec);
  }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Little-endian value reader over coding::ByteReader. After any failed read,
// ok() is false and every further read returns zeros.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return in_.ok(); }
  bool done() const { return in_.Done(); }
  uint8_t U8() { return Get<uint8_t>(); }
  uint32_t U32() { return Get<uint32_t>(); }
  uint64_t U64() { return Get<uint64_t>(); }
  Timespec Time() {
    Timespec t;
    t.sec = static_cast<int64_t>(U64());
    t.nsec = U32();
    if (t.nsec >= 1000000000u) in_.Fail();
    return t;
  }
  std::string Str(size_t max_len) {
    uint32_t n = U32();
    std::string_view s;
    if (!in_.ok() || n > max_len) {
      in_.Fail();
      return {};
    }
    if (!in_.ReadBytes(n, &s)) return {};
    return std::string(s);
  }

 private:
  template <typename T>
  T Get() {
    T v = 0;
    return in_.ReadLe(&v) ? v : 0;
  }

  coding::ByteReader in_;
};

Status Corrupt(std::string_view what) {
  return Status::Corruption("metadata record '" + std::string(what) +
                            "' is malformed; the metadata store is damaged "
                            "(restore it from a backup)");
}

std::string PrefixedIno(char prefix, uint64_t ino) {
  std::string k(1, prefix);
  coding::PutBe(&k, ino);
  return k;
}

constexpr uint8_t kInodeRecordVersion = 1;

}  // namespace

std::string MetaKey(std::string_view name) {
  std::string k(1, kPrefixMeta);
  k.append(name);
  return k;
}
std::string StatsShardKey(std::string_view id) {
  std::string k = MetaKey(kMetaStatsShard);
  k.append(id);
  return k;
}
std::string InodeKey(uint64_t ino) { return PrefixedIno(kPrefixInode, ino); }
std::string DentryPrefix(uint64_t parent) {
  return PrefixedIno(kPrefixDentry, parent);
}
std::string DentryKey(uint64_t parent, std::string_view name) {
  std::string k = DentryPrefix(parent);
  k.append(name);
  return k;
}
std::string CookiePrefix(uint64_t parent) {
  return PrefixedIno(kPrefixCookie, parent);
}
std::string CookieKey(uint64_t parent, uint64_t seq) {
  std::string k = CookiePrefix(parent);
  coding::PutBe(&k, seq);
  return k;
}
std::string XattrPrefix(uint64_t ino) { return PrefixedIno(kPrefixXattr, ino); }
std::string XattrKey(uint64_t ino, std::string_view name) {
  std::string k = XattrPrefix(ino);
  k.append(name);
  return k;
}
std::string StripePrefix(uint64_t ino) {
  return PrefixedIno(kPrefixStripe, ino);
}
std::string StripeKey(uint64_t ino, uint64_t stripe) {
  std::string k = StripePrefix(ino);
  coding::PutBe(&k, stripe);
  return k;
}
std::string OrphanKey(uint64_t ino) { return PrefixedIno(kPrefixOrphan, ino); }
std::string SymlinkKey(uint64_t ino) {
  return PrefixedIno(kPrefixSymlink, ino);
}

Result<uint64_t> ParseCookieSeq(std::string_view key) {
  if (key.size() != 17 || key[0] != kPrefixCookie) return Corrupt("cookie key");
  return coding::LoadBe<uint64_t>(key.data() + 9);
}

Result<uint64_t> ParseOrphanIno(std::string_view key) {
  if (key.size() != 9 || key[0] != kPrefixOrphan) return Corrupt("orphan key");
  return coding::LoadBe<uint64_t>(key.data() + 1);
}

Result<std::string> ParseXattrName(std::string_view key) {
  if (key.size() < 10 || key[0] != kPrefixXattr) return Corrupt("xattr key");
  return std::string(key.substr(9));
}

Result<StripeRef> ParseStripe(std::string_view key, std::string_view value) {
  if (key.size() != 17 || key[0] != kPrefixStripe) return Corrupt("stripe key");
  StripeRef ref;
  ref.inode = coding::LoadBe<uint64_t>(key.data() + 1);
  ref.sv.stripe = coding::LoadBe<uint64_t>(key.data() + 9);
  STRIPEFS_RETURN_IF_ERROR(DecodeStripeValue(value, &ref.sv));
  return ref;
}

std::string EncodeU64(uint64_t v) {
  Writer w;
  w.U64(v);
  return w.Take();
}

Result<uint64_t> DecodeU64(std::string_view in) {
  Reader r(in);
  uint64_t v = r.U64();
  if (!r.done()) return Corrupt("u64 counter");
  return v;
}

std::string EncodeU32(uint32_t v) {
  Writer w;
  w.U32(v);
  return w.Take();
}

Result<uint32_t> DecodeU32(std::string_view in) {
  Reader r(in);
  uint32_t v = r.U32();
  if (!r.done()) return Corrupt("u32 value");
  return v;
}

std::string EncodeInode(const InodeRecord& rec) {
  Writer w;
  const InodeAttr& a = rec.attr;
  w.U8(kInodeRecordVersion);
  w.U64(a.ino);
  w.U32(a.mode);
  w.U32(a.uid);
  w.U32(a.gid);
  w.U32(a.nlink);
  w.U64(a.size);
  w.U32(a.rdev);
  w.U64(a.generation);
  w.Time(a.atime);
  w.Time(a.mtime);
  w.Time(a.ctime);
  w.U64(rec.parent);
  w.U64(rec.next_seq);
  return w.Take();
}

Result<InodeRecord> DecodeInode(std::string_view in) {
  Reader r(in);
  InodeRecord rec;
  InodeAttr& a = rec.attr;
  if (r.U8() != kInodeRecordVersion) return Corrupt("inode (version)");
  a.ino = r.U64();
  a.mode = r.U32();
  a.uid = r.U32();
  a.gid = r.U32();
  a.nlink = r.U32();
  a.size = r.U64();
  a.rdev = r.U32();
  a.generation = r.U64();
  a.atime = r.Time();
  a.mtime = r.Time();
  a.ctime = r.Time();
  rec.parent = r.U64();
  rec.next_seq = r.U64();
  if (!r.done()) return Corrupt("inode");
  return rec;
}

std::string EncodeDentry(const DentryValue& d) {
  Writer w;
  w.U64(d.ino);
  w.U32(d.type);
  w.U64(d.seq);
  return w.Take();
}

Result<DentryValue> DecodeDentry(std::string_view in) {
  Reader r(in);
  DentryValue d;
  d.ino = r.U64();
  d.type = r.U32();
  d.seq = r.U64();
  if (!r.done() || d.ino == 0) return Corrupt("dentry");
  return d;
}

std::string EncodeStripeValue(uint64_t version, uint32_t missing_mask,
                              uint32_t chunk_len) {
  Writer w;
  w.U64(version);
  w.U32(missing_mask);
  w.U32(chunk_len);
  return w.Take();
}

Status DecodeStripeValue(std::string_view in, StripeVersion* sv) {
  Reader r(in);
  sv->version = r.U64();
  sv->missing_mask = r.U32();
  sv->chunk_len = r.U32();
  if (!r.done() || sv->version == 0) return Corrupt("stripe version");
  return Status::Ok();
}

std::string EncodeGeometry(const Geometry& g) {
  Writer w;
  w.U32(g.k);
  w.U32(g.m);
  w.U32(g.cell_size);
  return w.Take();
}

Result<Geometry> DecodeGeometry(std::string_view in) {
  Reader r(in);
  Geometry g;
  g.k = r.U32();
  g.m = r.U32();
  g.cell_size = r.U32();
  if (!r.done()) return Corrupt("geometry");
  if (Status s = ValidateGeometry(g); !s.ok()) return Corrupt("geometry");
  return g;
}

std::string EncodeStats(const FsStats& s) {
  Writer w;
  w.U64(s.inodes);
  w.U64(s.bytes_used);
  return w.Take();
}

Result<FsStats> DecodeStats(std::string_view in) {
  Reader r(in);
  FsStats s;
  s.inodes = r.U64();
  s.bytes_used = r.U64();
  if (!r.done()) return Corrupt("stats");
  return s;
}

FsStats AddStats(const FsStats& a, const FsStats& b) {
  return FsStats{a.inodes + b.inodes, a.bytes_used + b.bytes_used};
}

std::string EncodeClusterMap(const ClusterMap& m) {
  Writer w;
  w.U64(m.epoch);
  w.U32(static_cast<uint32_t>(m.servers.size()));
  for (const ServerInfo& s : m.servers) {
    w.U32(s.id);
    w.Str(s.address);
    w.Str(s.failure_domain);
    w.U8(static_cast<uint8_t>(s.state));
  }
  // Trailer since placement schemes (docs/backend.md): scheme, groups, a
  // weight per server. A legacy map with default weights omits it, so its
  // record stays byte-identical to the format before the trailer.
  const bool default_weights = std::all_of(
      m.servers.begin(), m.servers.end(),
      [](const ServerInfo& s) { return s.weight == kDefaultServerWeight; });
  if (m.placement == PlacementScheme::kLegacy && default_weights) {
    return w.Take();
  }
  w.U8(static_cast<uint8_t>(m.placement));
  w.U32(m.placement_groups);
  for (const ServerInfo& s : m.servers) w.U32(s.weight);
  return w.Take();
}

Result<ClusterMap> DecodeClusterMap(std::string_view in) {
  constexpr uint32_t kMaxServers = 1u << 16;
  constexpr size_t kMaxString = 4096;
  Reader r(in);
  ClusterMap m;
  m.epoch = r.U64();
  uint32_t n = r.U32();
  if (!r.ok() || n > kMaxServers) return Corrupt("cluster map");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    ServerInfo s;
    s.id = r.U32();
    s.address = r.Str(kMaxString);
    s.failure_domain = r.Str(kMaxString);
    uint8_t state = r.U8();
    if (state > static_cast<uint8_t>(ServerState::kOut))
      return Corrupt("cluster map");
    s.state = static_cast<ServerState>(state);
    m.servers.push_back(std::move(s));
  }
  if (r.ok() && r.done()) return m;  // no trailer: legacy, default weights
  const uint8_t scheme = r.U8();
  m.placement_groups = r.U32();
  if (scheme > static_cast<uint8_t>(PlacementScheme::kBalanced))
    return Corrupt("cluster map placement scheme");
  m.placement = static_cast<PlacementScheme>(scheme);
  if (m.placement == PlacementScheme::kBalanced &&
      (m.placement_groups == 0 || m.placement_groups > kMaxPlacementGroups))
    return Corrupt("cluster map placement groups");
  bool default_weights = true;
  for (ServerInfo& s : m.servers) {
    s.weight = r.U32();
    if (s.weight > kMaxServerWeight) return Corrupt("cluster map weight");
    default_weights = default_weights && s.weight == kDefaultServerWeight;
  }
  if (!r.done()) return Corrupt("cluster map");
  // The encoder never writes a trailer for a legacy map with default
  // weights: one that carries it is not a record we wrote.
  if (m.placement == PlacementScheme::kLegacy && default_weights)
    return Corrupt("cluster map: a legacy map with a needless trailer");
  return m;
}

std::string EncodeLeaderLease(const LeaderLease& l) {
  Writer w;
  w.Str(l.holder);
  w.U64(l.expires_ms);
  return w.Take();
}

Result<LeaderLease> DecodeLeaderLease(std::string_view in) {
  Reader r(in);
  LeaderLease l;
  l.holder = r.Str(4096);
  l.expires_ms = r.U64();
  if (!r.done()) return Corrupt("leader lease");
  return l;
}

Status ValidateGeometry(const Geometry& g) {
  constexpr uint32_t kMaxCell = 64u << 20;
  if (g.k < 1 || g.m < 1 || g.k + g.m > 32 || g.k > 32 || g.m > 32) {
    return Status::InvalidArgument(
        "geometry k=" + std::to_string(g.k) + " m=" + std::to_string(g.m) +
        " is not supported: need k >= 1, m >= 1 and k + m <= 32");
  }
  if (g.cell_size < 4096 || g.cell_size % 4096 != 0 || g.cell_size > kMaxCell) {
    return Status::InvalidArgument(
        "cell size " + std::to_string(g.cell_size) +
        " is not supported: use a multiple of 4096 between 4 KiB and 64 MiB");
  }
  return Status::Ok();
}

}  // namespace stripefs::meta_schema

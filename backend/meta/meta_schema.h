// The on-disk schema of MetaStore: RocksDB key layout and value encodings.
//
// All records live in the default column family, distinguished by a one-byte
// key prefix (see docs/metadata.md for the full table). Integers inside keys
// are fixed-width big-endian so that RocksDB's bytewise order is numeric
// order; integers inside values are fixed-width little-endian. Every decoder
// is bounds-checked and returns a Corruption status (never crashes) on short,
// long or otherwise malformed input.
//
// Pure functions over values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "backend/meta/meta_types.h"
#include "common/coding.h"
#include "common/status.h"

namespace stripefs::meta_schema {

// Bumped whenever the layout below changes incompatibly.
inline constexpr uint32_t kFormatVersion = 1;

// Key prefixes.
inline constexpr char kPrefixMeta = 'M';     // M<name> -> volume-wide records
inline constexpr char kPrefixInode = 'I';    // I<ino> -> InodeRecord
inline constexpr char kPrefixDentry = 'D';   // D<parent><name> -> DentryValue
inline constexpr char kPrefixCookie = 'C';   // C<parent><seq> -> name
inline constexpr char kPrefixXattr = 'X';    // X<ino><name> -> value
inline constexpr char kPrefixStripe = 'S';   // S<ino><stripe> -> StripeVersion
inline constexpr char kPrefixOrphan = 'O';   // O<ino> -> "" or kLinkable
inline constexpr char kPrefixSymlink = 'L';  // L<ino> -> target

// Names of the M records.
inline constexpr std::string_view kMetaFormat = "format";      // u32
inline constexpr std::string_view kMetaGeometry = "geometry";  // Geometry
// Inode numbers below M next_inode may be in use: each MetaStore leases a
// block of them with one transaction and hands them out locally (issue 16).
// Release 1 stored the exact next number here; the meaning "below it may be
// in use" covers both, so old stores open unchanged.
inline constexpr std::string_view kMetaNextInode = "next_inode";        // u64
inline constexpr std::string_view kMetaVersionLimit = "version_limit";  // u64
// Volume statistics: M stats (the base, the only record in release 1 and on
// RocksDB) plus, on shared engines, one shard M stats/<id> per MetaStore
// holding its own changes (wrapping u64 deltas). StatFs sums the range, so
// creates on different metads write different keys. Any MetaStore may fold
// a shard into the base (read both, add, delete the shard): every shard
// update is a read-modify-write, so folding is just another conflict.
inline constexpr std::string_view kMetaStats = "stats";        // FsStats
inline constexpr std::string_view kMetaStatsShard = "stats/";  // + id
inline constexpr std::string_view kMetaCluster = "cluster";    // ClusterMap
inline constexpr std::string_view kMetaLeader = "leader";      // LeaderLease
// 16 random bytes made with the volume; a volume made before it gets one
// the first time it is opened (one transaction: concurrent openers agree).
inline constexpr std::string_view kMetaVolumeUuid = "volume_uuid";

// Who runs the volume-wide background work (the health monitor) until
// when: one holder at a time among the metads of a volume.
struct LeaderLease {
  std::string holder;
  uint64_t expires_ms = 0;  // wall clock, ms since the Unix epoch
};

// Value of the orphan record of an O_TMPFILE inode never linked: the one
// kind of orphan Link may give a name.
inline constexpr std::string_view kOrphanLinkable = "linkable";

// ReadDir cookies: 1 = ".", 2 = "..", entries use their sequence number,
// which starts at kFirstEntrySeq and only grows per directory.
inline constexpr uint64_t kCookieDot = 1;
inline constexpr uint64_t kCookieDotDot = 2;
inline constexpr uint64_t kFirstEntrySeq = 3;

// An inode as stored: the public attributes plus directory bookkeeping.
struct InodeRecord {
  InodeAttr attr;
  uint64_t parent = 0;    // directories: the containing directory ('..')
  uint64_t next_seq = 0;  // directories: next cookie sequence to assign
};

struct DentryValue {
  uint64_t ino = 0;
  uint32_t type = 0;  // S_IFMT bits of the target
  uint64_t seq = 0;   // cookie of this entry in its directory
};

// --- keys -------------------------------------------------------------------
std::string MetaKey(std::string_view name);
// M stats/<id>; every stats record (base and shards) lies in
// [MetaKey(kMetaStats), PrefixEnd(MetaKey(kMetaStats))).
std::string StatsShardKey(std::string_view id);
std::string InodeKey(uint64_t ino);
std::string DentryKey(uint64_t parent, std::string_view name);
std::string DentryPrefix(uint64_t parent);
std::string CookieKey(uint64_t parent, uint64_t seq);
std::string CookiePrefix(uint64_t parent);
std::string XattrKey(uint64_t ino, std::string_view name);
std::string XattrPrefix(uint64_t ino);
std::string StripeKey(uint64_t ino, uint64_t stripe);
std::string StripePrefix(uint64_t ino);
std::string OrphanKey(uint64_t ino);
std::string SymlinkKey(uint64_t ino);
// The exclusive end of a prefix's keys (common/coding.h).
using coding::PrefixEnd;

// Parsers of keys read back while iterating (bounds-checked).
Result<uint64_t> ParseCookieSeq(std::string_view key);     // C<p><seq>
Result<uint64_t> ParseOrphanIno(std::string_view key);     // O<ino>
Result<std::string> ParseXattrName(std::string_view key);  // X<ino><name>
Result<StripeRef> ParseStripe(std::string_view key, std::string_view value);

// --- values -----------------------------------------------------------------
std::string EncodeU64(uint64_t v);
Result<uint64_t> DecodeU64(std::string_view in);
std::string EncodeU32(uint32_t v);
Result<uint32_t> DecodeU32(std::string_view in);

std::string EncodeInode(const InodeRecord& r);
Result<InodeRecord> DecodeInode(std::string_view in);
std::string EncodeDentry(const DentryValue& d);
Result<DentryValue> DecodeDentry(std::string_view in);
std::string EncodeStripeValue(uint64_t version, uint32_t missing_mask,
                              uint32_t chunk_len);
// Fills version, missing_mask and chunk_len of *sv (not sv->stripe).
Status DecodeStripeValue(std::string_view in, StripeVersion* sv);
std::string EncodeGeometry(const Geometry& g);
Result<Geometry> DecodeGeometry(std::string_view in);
std::string EncodeStats(const FsStats& s);
Result<FsStats> DecodeStats(std::string_view in);
// Sum of the base and every shard (wrapping arithmetic, as stored).
FsStats AddStats(const FsStats& a, const FsStats& b);
std::string EncodeClusterMap(const ClusterMap& m);
Result<ClusterMap> DecodeClusterMap(std::string_view in);
std::string EncodeLeaderLease(const LeaderLease& l);
Result<LeaderLease> DecodeLeaderLease(std::string_view in);

// Checks the limits MetaStore accepts: 1 <= k, 1 <= m, k + m <= 32,
// cell_size a multiple of 4096 in [4096, 64 MiB].
Status ValidateGeometry(const Geometry& g);

}  // namespace stripefs::meta_schema

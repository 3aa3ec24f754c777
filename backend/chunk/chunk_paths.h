// ChunkPaths: the names of everything under a chunk store directory, and the
// small file-system helpers the store's parts share.
//
// Layout under `dir` (the one place these names are spelled):
//   CHUNKSTORE        marker file ("stripefs chunk store 2"; stores written
//                     before segments say "... 1" and are still opened)
//   chunkstore.lock   flock()ed while open; holds the owner's pid
//   index/            RocksDB: (inode, stripe, index, version) -> location,
//                     length and CRCs (chunk_index_codec.h); the truth
//   segments/<seq %016x>.seg
//                     append-only, preallocated segment files holding the
//                     chunks written by this engine
//   segments/<n %016x>.spare
//                     a zero-filled (already written) file waiting to become
//                     the next segment; "<n>.spare.tmp" while being filled
//   index.reserve     kIndexReserveBytes preallocated, given up when the index
//                     cannot be written on a full disk (so deletes, which
//                     free space only once committed, still commit)
//   data/<inode %016x>/<stripe>>12 %x>/<stripe %016x>.<index>.<version %016x>
//   tmp/              the one-file-per-chunk-version layout of stores written
//                     before segments: still read, deleted and swept, never
//                     written
// Pure functions (and plain syscalls); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "common/status.h"

namespace stripefs::chunk_paths {

inline constexpr char kMarkerName[] = "CHUNKSTORE";
inline constexpr char kMarkerLegacy[] = "stripefs chunk store 1\n";
inline constexpr char kMarkerSegments[] = "stripefs chunk store 2\n";
inline constexpr char kLockName[] = "chunkstore.lock";
inline constexpr char kIndexName[] = "index";
inline constexpr char kSegmentsName[] = "segments";
inline constexpr char kDataName[] = "data";
inline constexpr char kTmpName[] = "tmp";
inline constexpr char kSegmentSuffix[] = ".seg";
inline constexpr char kSpareSuffix[] = ".spare";
inline constexpr char kSpareTmpSuffix[] = ".spare.tmp";
inline constexpr char kIndexReserveName[] = "index.reserve";
// Lets the WAL records of deletes and the memtable flush of RocksDB's
// resume through on a full disk (256 KiB was measured too small).
inline constexpr uint64_t kIndexReserveBytes = uint64_t{1} << 20;
// Stripes per second-level legacy data directory.
inline constexpr unsigned kStripeBucketShift = 12;

// "<dir>/data/<inode>/<bucket>/<stripe>.<index>.<version>".
std::string LegacyChunkPath(const std::string& data_dir, const ChunkId& id,
                            uint64_t version);
// "<stripe %016x>.<index>.<version %016x>" -> parts.
bool ParseLegacyChunkFileName(std::string_view name, uint64_t* stripe,
                              uint32_t* index, uint64_t* version);
// "<seq %016x>.seg" <-> seq.
std::string SegmentFileName(uint64_t seq);
bool ParseSegmentFileName(std::string_view name, uint64_t* seq);
// "<n %016x>.spare" <-> n; "<n %016x>.spare.tmp" for one being filled.
std::string SpareFileName(uint64_t n);
bool ParseSpareFileName(std::string_view name, uint64_t* n);
std::string SpareTmpFileName(uint64_t n);
bool ParseSpareTmpFileName(std::string_view name, uint64_t* n);

bool ParseHex64(std::string_view s, uint64_t* out);
std::string Hex16(uint64_t v);

bool IsNoSpace(int err);
Status FsyncDir(const std::string& path);
// Names in a directory except "." and "..".
Result<std::vector<std::string>> ListDir(const std::string& path);
// "stripefs chunk store <dir>: <message>" on stderr.
void Log(const std::string& dir, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

}  // namespace stripefs::chunk_paths

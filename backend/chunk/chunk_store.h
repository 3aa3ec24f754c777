// ChunkStore: the ChunkService over a local directory (chunkd's storage
// engine, also used in process by the embedded volume).
//
// Layout under `dir`:
//   CHUNKSTORE           marker file ("stripefs chunk store 1")
//   chunkstore.lock      flock()ed while open; holds the owner's pid
//   index/               RocksDB: (inode, stripe, index, version) ->
//                        (length, crc32c, flags); the source of truth
//   data/<inode %016x>/<stripe>>12 %x>/<stripe %016x>.<index>.<version %016x>
//                        one file per chunk version, exactly `length` bytes
//   tmp/                 chunk files being written (removed at open)
// A write goes tmp file -> fdatasync -> rename into data/ -> fsync dir ->
// index put (sync). A data file without an index entry is an orphan (removed
// by Sweep(), which Open() runs); an index entry without its file is a missing
// chunk (ENOENT on read, counted, entry dropped).
//
// Thread-safety: all methods may be called concurrently from many threads.
// Operations on the same ChunkId are serialized by a striped lock (reads
// share it). Owns the RocksDB handle, the lock file and the io_uring pool.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "common/status.h"

namespace rocksdb {
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace stripefs {

class UringFileIo;
struct ChunkIndexValue;

// The space a chunk store keeps free on its file system for the indexes
// and metadata that share it: a small fixed floor plus a share of the file
// system's size, so small volumes stay usable and large ones keep room for
// RocksDB compactions. 64 MiB file system -> 4.6 MiB; 1 TiB -> ~10 GiB.
inline constexpr uint64_t kChunkReserveFloorBytes = uint64_t{4} << 20;
inline constexpr uint64_t kChunkReservePercent = 1;
uint64_t ScaledChunkReserve(uint64_t capacity_bytes);
// ChunkStoreOptions::reserve_bytes: use ScaledChunkReserve(capacity).
inline constexpr uint64_t kScaledReserve = ~uint64_t{0};

struct ChunkStoreOptions {
  // Writes are refused with ENOSPC (before anything is written) when the
  // file system would have fewer than this many bytes available after the
  // write. kScaledReserve (default): ScaledChunkReserve of the capacity of
  // the file system at Open(). 0 = no check: rely on real ENOSPC only.
  uint64_t reserve_bytes = kScaledReserve;
  // Largest chunk accepted by WriteChunk (EINVAL above).
  uint32_t max_chunk_bytes = 64u << 20;
  // Use io_uring for chunk data I/O (falls back to pread/pwrite by itself
  // when rings cannot be set up). false forces the fallback.
  bool use_io_uring = true;
  // Run Sweep() during Open().
  bool sweep_on_open = true;
  // Create the layout when `dir` is missing or empty.
  bool create_if_missing = true;
};

// Counters beyond ChunkStoreStats (since Open unless said otherwise).
struct ChunkStoreCounters {
  uint64_t missing_chunks = 0;      // index entries whose file was gone
  uint64_t malformed_entries = 0;   // index keys/values that failed decoding
  uint64_t nospace_refusals = 0;    // writes refused or failed with ENOSPC
  uint64_t orphans_removed = 0;     // data files without index entry
  uint64_t temp_files_removed = 0;  // leftovers in tmp/
  uint64_t clones_linked = 0;       // CloneChunk calls served by a hard link
};

// What one Sweep() found and did.
struct SweepReport {
  uint64_t temp_files_removed = 0;
  uint64_t orphans_removed = 0;  // data files with no index entry
  uint64_t missing_dropped = 0;  // index entries with no data file
  uint64_t unknown_files = 0;    // names in data/ we do not own (left)
  uint64_t empty_dirs_removed = 0;
};

class ChunkStore final : public ChunkService {
 public:
  // Opens (creating if absent) the chunk store in `dir`. Errors: ENOTDIR
  // (not a directory), EACCES/EROFS (not writable), EBUSY (another process
  // or ChunkStore holds it), ENOTEMPTY (a non-empty directory that is not a
  // chunk store), EBADMSG (index unreadable).
  static Result<std::unique_ptr<ChunkStore>> Open(
      const std::string& dir, const ChunkStoreOptions& options = {});
  ~ChunkStore() override;

  // ChunkService. Version 0 is not a valid chunk version (EINVAL).
  Status WriteChunk(const ChunkId& id, uint64_t version,
                    std::span<const uint8_t> data) override;
  Result<std::vector<uint8_t>> ReadChunk(const ChunkId& id, uint64_t version,
                                         uint32_t offset,
                                         uint32_t length) override;
  Status DeleteChunk(const ChunkId& id, uint64_t keep_version) override;
  Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo& after,
                                            uint32_t limit) override;
  Result<ChunkStoreStats> Stats() override;
  // Deletes exactly (id, version) (absent is OK).
  Status DeleteChunkVersion(const ChunkId& id, uint64_t version) override;
  // A hard link when `length` is the whole chunk (the source is CRC-verified
  // first; versions are immutable and rewrites replace files by rename, so
  // sharing the inode is safe); otherwise, or when the file system refuses
  // links, the read+write default.
  Status CloneChunk(const ChunkId& id, uint64_t from_version,
                    uint64_t to_version, uint32_t length) override;

  // Removes tmp/ leftovers and orphan data files, drops index entries whose
  // data file is gone, and removes empty data directories. Safe to run
  // concurrently with other operations.
  Result<SweepReport> Sweep();

  ChunkStoreCounters Counters() const;

  // Where chunk (id, version) lives (whether or not it exists). For tests
  // and tools (e.g. to flip bits in a stored chunk).
  std::string DataPath(const ChunkId& id, uint64_t version) const;
  const std::string& dir() const { return dir_; }
  bool using_io_uring() const;
  // The reserve in force (bytes; fixed at Open()).
  uint64_t reserve_bytes() const { return reserve_bytes_; }

 private:
  ChunkStore(std::string dir, const ChunkStoreOptions& options);

  Status OpenIndex();
  Status RecountFromIndex();
  std::shared_mutex& LockFor(const ChunkId& id);
  Status CheckSpace(size_t len);
  // mkdir -p of the chunk's directories, each made durable (parent fsynced)
  // once per process.
  Status EnsureDataDirs(const ChunkId& id);
  Status EnsureDurableDir(const std::string& path, const std::string& parent);
  void NoteMissing(const ChunkId& id, uint64_t version);
  Status NoSpaceStatus(const std::string& what);
  // Drops the index entry of a missing chunk (caller holds the chunk lock
  // exclusively).
  Status DropEntry(const ChunkId& id, uint64_t version);
  // Reads and CRC-verifies the data file of (id, version) described by `v`
  // (caller holds the chunk lock). ENOENT only when the file is missing;
  // EBADMSG (counted) on any mismatch.
  Status ReadVerified(const ChunkId& id, uint64_t version,
                      const ChunkIndexValue& v, std::vector<uint8_t>* out);
  // Bytes [offset, offset + length) of it (in range, checked by the caller):
  // with block CRCs only the covered blocks are read and verified.
  Status ReadVerifiedRange(const ChunkId& id, uint64_t version,
                           const ChunkIndexValue& v, uint32_t offset,
                           uint32_t length, std::vector<uint8_t>* out);
  // CloneChunk of a whole chunk by hard link (caller holds the chunk lock
  // exclusively). *linked false with OK: links unsupported, copy instead.
  Status CloneByLinkLocked(const ChunkId& id, uint64_t from_version,
                           uint64_t to_version, const ChunkIndexValue& v,
                           bool* linked);
  // Renames a synced temp file to `final_path` (directories created, the
  // parent fsynced). On failure nothing new is left behind; `what` names the
  // operation in errors ("storing chunk ...").
  Status MoveIntoPlace(const ChunkId& id, const std::string& tmp,
                       const std::string& final_path, bool existed,
                       const std::string& what);
  // Writes the synced index entry that makes a placed file a chunk and
  // counts it; removes the file again if the entry cannot be written.
  Status IndexPlaced(const std::string& key, const ChunkIndexValue& v,
                     const std::string& final_path, bool existed,
                     const std::string& name);
  Status DeleteMatching(const ChunkId& id,
                        const std::function<bool(uint64_t)>& doomed);
  // Applies a batch to the index with a synced WAL, resuming RocksDB once
  // after a failed write (e.g. after the disk was full).
  Status IndexWrite(const std::function<void(rocksdb::WriteBatch*)>& fill);

  const std::string dir_;
  const std::string data_dir_;
  const std::string tmp_dir_;
  const ChunkStoreOptions options_;
  uint64_t reserve_bytes_ = 0;  // options_.reserve_bytes resolved at Open()
  // Temp files of this instance start with it ("<pid>-<random>."); Sweep
  // removes every other file in tmp/.
  std::string tmp_prefix_;
  int lock_fd_ = -1;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<UringFileIo> io_;

  static constexpr size_t kLockStripes = 256;
  std::array<std::shared_mutex, kLockStripes> chunk_locks_;
  // Writers hold it shared from mkdir to rename; Sweep holds it exclusively
  // to remove empty directories.
  std::shared_mutex dirs_mu_;
  std::mutex durable_mu_;
  std::unordered_set<std::string> durable_dirs_;
  std::atomic<uint64_t> tmp_seq_{0};

  std::atomic<uint64_t> chunks_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> crc_errors_{0};
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> missing_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> nospace_{0};
  std::atomic<uint64_t> orphans_{0};
  std::atomic<uint64_t> temps_{0};
  std::atomic<uint64_t> clones_{0};
};

}  // namespace stripefs

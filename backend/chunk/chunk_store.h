// ChunkStore: the ChunkService over a local directory (chunkd's storage
// engine, also used in process by the embedded volume).
//
// Chunks are appended to preallocated segment files (segment_set.h; the
// layout is in chunk_paths.h) and found through a RocksDB index that maps
// (chunk id, version) to (segment, offset, length, per-4 KiB CRC32Cs). A
// writer appends its bytes itself (io_uring, O_DIRECT when the file system
// takes it), so writers keep the disk busy in parallel. Then one commit
// thread group-commits: it takes every write and delete that arrived while
// the previous batch was syncing and runs ONE sync round for them: one
// synced RocksDB WriteBatch (entries plus a pending record, below) on the
// index thread and, at the same time, one fdatasync per touched segment on
// the commit thread; it acknowledges the batch when both are durable. On
// an ext4 with a journal the two can share one journal commit. No temp file,
// rename or directory fsync per chunk.
//
// Crash rules: the index is the truth. Bytes in a segment that no committed
// entry points to are garbage (cut off or removed at open). An entry may be
// durable before its bytes, so every WriteBatch that adds entries with new
// bytes also holds a pending record (chunk_index_codec.h) naming each such
// entry, the piece it wrote and the entry it replaced; a later batch (or
// Close) deletes the record once the batch was acknowledged. Open verifies
// every entry a pending record names (reads its new piece, checks the block
// CRCs): one that fails is rolled back (removed, or the entry it replaced
// put back, and its space counted free), the verified ones are fdatasynced,
// then the records are deleted. So: an acknowledged write is never lost or
// touched (its record is gone, or it verifies); an unacknowledged write of
// a batch whose WriteBatch committed may survive (whole and verified) or
// vanish, per entry; a batch whose WriteBatch did not commit leaves nothing
// visible. Deletes, clones and compaction moves: their entries are written
// in the same WriteBatch (moves carry a pending record with the entry they
// replace, so a move whose copy did not reach the disk is undone at open);
// a hole is punched only after the batch is acknowledged.
//
// Pieces: a version is a list of pieces (extents of segments, index format
// 4) that versions of the same chunk id may share: CloneChunk makes an
// entry with the source's pieces (nothing read), PatchChunk writes only the
// 4 KiB blocks its window covers and shares the rest of the source's
// pieces (at most kMaxChunkPieces; past that, or for a window of most of the
// chunk, it writes the whole chunk as one piece).
//
// Space: a segment's live bytes are the segment bytes the versions of each
// chunk id reference together (a piece shared by versions counts once).
// Bytes that no remaining version of the chunk id references are punched
// out (fallocate PUNCH_HOLE) when a version goes; this is worked out under
// the chunk's lock from all its versions (few per id). A background
// compactor, held to an I/O budget, copies the live chunks out of
// mostly-dead sealed segments and removes them, with reads running
// concurrently; it rewrites each version with a piece there as one piece
// (identical versions, i.e. clones, share the copy; versions that shared
// only some pieces each get their own). A write that finds the disk full
// first compacts everything it can and retries once.
//
// Stores written by the one-file-per-version release (marker "... 1") open
// as they are: their chunks are read, deleted and swept where they are
// (chunk_sweep.cc); new versions go to segments.
//
// Version cache (chunk_version_cache.h): the versions the index holds for
// recently used chunk ids, so that writes, clones, patches and deletes do
// not scan the index for them (GatherVersions, PrepareDelete). It is exact:
// a commit updates the entry under the chunk lock once the index write is
// done (CommitBatch), every other index write drops the ids it touches
// (IndexWrite, or clears it all when it cannot tell), and a miss fills it
// only when nothing changed the cache's shard during the scan. Bounded by
// ChunkStoreOptions::version_cache_bytes; empty at open.
//
// Thread-safety: all methods may be called concurrently from many threads.
// Operations on the same ChunkId are serialized by a striped lock (reads
// share it). Owns the RocksDB handle, the lock file, the segment files, the
// io_uring pool, the commit thread, the compactor thread and the version
// cache.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/chunk/chunk_store_counters.h"
#include "backend/chunk/segment_set.h"
#include "common/buffer_pool.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"

namespace rocksdb {
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace stripefs {

class ChunkVersionCache;
class UringFileIo;
struct ChunkIndexValue;
struct PendingEntry;

// The space a chunk store keeps free on its file system for the indexes
// and metadata that share it: a small fixed floor plus a share of the file
// system's size, so small volumes stay usable and large ones keep room for
// RocksDB compactions. 64 MiB file system -> 4.6 MiB; 1 TiB -> ~10 GiB.
inline constexpr uint64_t kChunkReserveFloorBytes = uint64_t{4} << 20;
inline constexpr uint64_t kChunkReservePercent = 1;
uint64_t ScaledChunkReserve(uint64_t capacity_bytes);
// ChunkStoreOptions::reserve_bytes: use ScaledChunkReserve(capacity).
inline constexpr uint64_t kScaledReserve = ~uint64_t{0};
// The segment size a store uses: `wanted`, but at most 1/64 of the file
// system's capacity (and at least kMinSegmentBytes), so that the k+m stores
// of a small volume do not preallocate it whole.
inline constexpr uint64_t kMinSegmentBytes = uint64_t{1} << 20;
uint64_t ScaledSegmentBytes(uint64_t wanted, uint64_t capacity_bytes);
// A patched version has at most this many pieces; a patch that would make
// more writes the whole chunk (one piece) instead.
inline constexpr size_t kMaxChunkPieces = 64;
// Zero-filled spare segments are kept only on a file system this many
// segments big (ChunkStoreOptions::spare_segments).
inline constexpr uint64_t kMinSegmentsForSpares = 256;

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
  // Size each segment file is preallocated to.
  uint64_t segment_bytes = uint64_t{64} << 20;
  // Write segments with O_DIRECT where the file system allows it.
  bool use_direct_io = true;
  // Writes of at most this many bytes (a patch's new blocks, small chunks)
  // go through the page cache instead of O_DIRECT, so that they stay
  // readable from memory: the next delta of the same blocks reads the old
  // data (client) and old parity (PatchChunk) back at once instead of from
  // the disk. Durability is the same: the batch's fdatasync covers them.
  // 0: every aligned write is O_DIRECT.
  uint64_t buffered_write_max_bytes = uint64_t{64} << 10;
  // Zero-filled segment files kept ready in the background, so that data
  // syncs commit no extent conversion (segment_set.h). Only on a file
  // system of at least kMinSegmentsForSpares segments, and while 16
  // segments plus the reserve are free. 0 (default: the zero writes cost
  // more than they saved on the VM measured, docs/chunk-store.md):
  // segments are only preallocated.
  uint32_t spare_segments = 0;
  // Punch the extent of a deleted version out of its segment at once.
  bool punch_holes = true;
  // Dead ranges smaller than this are not punched but left to compaction:
  // on ext4 a punch costs a journal update (and a discard with `-o
  // discard`) whatever its size, and the dead windows of small patches
  // made it ~12 % of a chunkd's CPU in 4 KiB random writes.
  uint64_t punch_min_bytes = uint64_t{64} << 10;
  // Background compaction: a sealed segment whose live bytes fall below this
  // fraction is rewritten, at most `compact_bytes_per_sec` (0: no background
  // compactor; Compact() still works).
  double compact_live_fraction = 0.5;
  uint64_t compact_bytes_per_sec = uint64_t{32} << 20;
  // Memory for the version cache (approximate bytes; see "Version cache").
  // 0: no cache, every write and delete scans the index.
  uint64_t version_cache_bytes = uint64_t{32} << 20;
  // Test hook: called by the committer with each batch's op count after it
  // takes the batch and before anything of it is written (so a test can hold
  // one batch while writers queue behind it). Unset in production.
  std::function<void(size_t ops)> before_commit_batch;
};

// What one Sweep() found and did.
struct SweepReport {
  uint64_t temp_files_removed = 0;
  uint64_t orphans_removed = 0;  // legacy data files with no index entry
  uint64_t missing_dropped = 0;  // index entries with no data
  uint64_t unknown_files = 0;    // names in data/ we do not own (left)
  uint64_t empty_dirs_removed = 0;
  uint64_t segments_removed = 0;  // segments without live entries
};

struct CompactionReport {
  uint64_t segments_compacted = 0;
  uint64_t chunks_moved = 0;
  uint64_t bytes_moved = 0;
  uint64_t unreadable = 0;  // chunks left behind (corrupt): segment stays
};

// Where a chunk's bytes are: `length` bytes at `offset` of `path` (for a
// chunk of several pieces: the piece asked for, from the asked chunk
// offset on).
struct ChunkLocation {
  std::string path;
  uint64_t offset = 0;
  uint32_t length = 0;
  bool in_segment = false;
  size_t pieces = 0;  // of the whole chunk
};

class ChunkStore final : public ChunkService {
 public:
  // Segment reads of at least this many bytes bypass the page cache (see
  // ReadChunkInto): a 1 MiB stripe's 256 KiB cells do, 4 KiB reads do not.
  static constexpr uint64_t kDirectReadMinBytes = uint64_t{64} << 10;

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
  // Reads in place: block-aligned ranges (and whole chunks) go from the file
  // straight into `out`, other ranges through a bounce buffer of the
  // covered CRC blocks. A segment range of at least kDirectReadMinBytes
  // that starts 4 KiB aligned on disk and in memory (`out` from a
  // BufferPool or AlignedBytes) is read O_DIRECT (segments written
  // O_DIRECT only), its short last block through the page cache; smaller
  // reads stay buffered, so repeated small reads hit the page cache. CRCs
  // are verified the same way on both paths.
  Status ReadChunkInto(const ChunkId& id, uint64_t version, uint32_t offset,
                       std::span<uint8_t> out) override;
  // ReadChunkInto only when nothing has to wait: the chunk lock is taken
  // with try_lock (held exclusively: WouldBlock), the index entry must be
  // in RocksDB's memtable or block cache (read_tier kBlockCacheTier:
  // Incomplete is WouldBlock), and every byte comes from the page cache
  // through the segment's buffered fd (UringFileIo::ReadIfCached, also for
  // ranges ReadChunkInto would read O_DIRECT). CRCs are verified as in
  // ReadChunkInto. Legacy chunk files and data found missing are
  // WouldBlock too (ReadChunkInto deals with them). Absent: ENOENT; past
  // the end: EINVAL.
  Status TryReadChunkInto(const ChunkId& id, uint64_t version, uint32_t offset,
                          std::span<uint8_t> out) override;
  // ReadChunkInto, ETIMEDOUT when `deadline` has passed before it starts.
  // A local read is bounded by the disk and is not interrupted once
  // started (it may end after the deadline); when it returns it has
  // stopped touching `out`, as the contract asks.
  Status ReadChunkIntoBy(
      const ChunkId& id, uint64_t version, uint32_t offset,
      std::span<uint8_t> out,
      std::chrono::steady_clock::time_point deadline) override;
  // Holds every read's chunk lock (shared, address order), looks each up,
  // then submits the file reads of all of them together (one io_uring
  // submission and one wait per UringFileIo::kBatchDepth file reads, not
  // one per read), then verifies each as ReadChunkInto does (same paths,
  // O_DIRECT rule and errors, per read). The deadline is checked once
  // before starting (ETIMEDOUT for every read), as ReadChunkIntoBy does.
  std::vector<Status> ReadChunkRanges(
      std::span<const ChunkRangeRead> reads,
      std::chrono::steady_clock::time_point deadline) override;
  Status DeleteChunk(const ChunkId& id, uint64_t keep_version) override;
  Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo& after,
                                            uint32_t limit) override;
  Result<ChunkStoreStats> Stats() override;
  // Deletes exactly (id, version) (absent is OK).
  Status DeleteChunkVersion(const ChunkId& id, uint64_t version) override;
  // All of them in one group commit (one synced index write), holding the
  // chunk locks they need in address order.
  Status DeleteChunkVersions(std::span<const ChunkVersion> chunks) override;
  // Whole chunk in segments: a new index entry with the source's pieces;
  // nothing is read (versions are immutable; reads and scrub verify). A
  // prefix, or a legacy source file: the read+write default.
  Status CloneChunk(const ChunkId& id, uint64_t from_version,
                    uint64_t to_version, uint32_t length) override;
  // Source in segments: writes only the window rounded out to CRC blocks
  // (the partly covered boundary blocks are read from the source and
  // CRC-verified, EBADMSG if corrupt) and commits an entry whose pieces
  // and block CRCs are the source's with that range replaced; untouched
  // blocks are not read. A window over most of the chunk, one that would
  // leave more than kMaxChunkPieces pieces, a prefix, a legacy source or
  // to == from: the read+write default. An empty window is a clone.
  Status PatchChunk(const ChunkId& id, uint64_t from_version,
                    uint64_t to_version, uint32_t length, uint32_t offset,
                    std::span<const uint8_t> bytes) override;
  // Every op that can be batched (see below) is prepared under its chunk
  // lock (all held exclusively, in address order), their bytes written in
  // one io_uring submission, and all queued to the group commit together
  // with ONE wait; durability and per-op errors are those of the one-op
  // calls (each op durable when its Status is OK, independent of the
  // others). To the one-op path (ChunkService's default, a thread each)
  // go: ops of a chunk id named twice, whole-chunk patches, prefix or
  // legacy clones and patches, invalid ops, ops that found the disk full
  // (it compacts and retries).
  std::vector<Status> ApplyChunkOps(std::span<const ChunkWriteOp> ops) override;
  // As PatchChunk, with one new piece per range (rounded out to CRC
  // blocks; touching ones merged): the source's bytes between the ranges
  // are neither read nor written again. Ranges adding up to more than half
  // the chunk read and write the whole chunk (counted as patches_whole).
  Status PatchChunkRanges(const ChunkId& id, uint64_t from_version,
                          uint64_t to_version, uint32_t length,
                          std::span<const PatchRange> ranges,
                          std::span<const uint8_t> bytes) override;

  // Removes legacy tmp/ leftovers and orphan data files, drops index entries
  // whose data is gone, removes empty legacy directories and unused
  // segments. Safe to run concurrently with other operations.
  Result<SweepReport> Sweep();
  // Rewrites the live chunks of sealed segments below the live fraction
  // (every sealed segment with dead bytes when `everything`, after sealing
  // the active one) and removes them. Runs at full speed; the background
  // compactor calls it with its budget.
  Result<CompactionReport> Compact(bool everything)
      STRIPEFS_EXCLUDES(compact_mu_);

  ChunkStoreCounters Counters() const;
  // Ops queued for the committer and not yet taken into a batch (tests).
  size_t queued_commit_ops() const STRIPEFS_EXCLUDES(queue_mu_);
  std::vector<SegmentInfo> Segments();
  // Compares every version cache entry with a fresh scan of the index
  // (under the entry's chunk lock, shared): Corruption naming the first
  // chunk id whose entry differs. For tests and debugging; OK without a
  // cache.
  Status VerifyVersionCache();

  // Where byte `at` of chunk (id, version) is stored (EINVAL past its
  // end, except `at` 0). For tests and tools (e.g. to flip bits in a
  // stored chunk).
  Result<ChunkLocation> Locate(const ChunkId& id, uint64_t version,
                               uint32_t at = 0);
  const std::string& dir() const { return dir_; }
  bool using_io_uring() const;
  // The reserve in force (bytes; fixed at Open()).
  uint64_t reserve_bytes() const { return reserve_bytes_; }

 private:
  struct CommitOp;
  struct Freed;
  struct Hole;
  struct RangeRead;
  struct RangeReadIo;
  struct BatchOp;

  ChunkStore(std::string dir, const ChunkStoreOptions& options);

  // Open's steps after the directory checks: the lock file, the layout
  // and the index (writing the marker when asked); sizing from the file
  // system, the I/O, the segments and the index reserve; the sweep; the
  // commit, index and compactor threads.
  Status PrepareLayout(bool write_marker);
  Status OpenData();
  Status SweepAtOpen();
  void StartThreads();
  Status OpenIndex();
  // Counts chunks and bytes, and what each segment holds.
  Status RecountFromIndex(std::map<uint64_t, SegmentUsage>* usage);
  // Calls fn(id, version, value) for every chunk entry in key order; value
  // is nullptr for an entry that does not decode. Returns the scan's error.
  using IndexVisitor =
      std::function<void(const ChunkId&, uint64_t, const ChunkIndexValue*)>;
  Status ScanIndex(const IndexVisitor& fn);
  Status OpenSegments();
  // Sweep's steps (chunk_sweep.cc): removes tmp/ leftovers; removes the
  // orphan files of legacy bucket `bpath` (inode `inode`, bucket `bucket`);
  // walks data/ for them, listing the bucket and inode directories it saw;
  // drops the legacy entries whose file is gone.
  Status SweepTmp(SweepReport* rep);
  Status SweepLegacyBucket(uint64_t inode, uint64_t bucket,
                           const std::string& bpath, SweepReport* rep);
  Status SweepLegacyData(SweepReport* rep,
                         std::vector<std::string>* bucket_paths,
                         std::vector<std::string>* inode_paths);
  Status DropMissingLegacy(SweepReport* rep);
  // Drops the entries with a piece in a segment file that is gone.
  Status DropMissing(const std::vector<uint64_t>& missing);
  // Verifies the entries the pending records name (rolling back those that
  // fail), syncs the segments of the rest, deletes the records. `held`:
  // the usage OpenSegments added for the entries they replaced, given back
  // at the end.
  Status RecoverPending(const std::vector<PendingEntry>& entries,
                        const std::vector<std::string>& keys,
                        const std::map<uint64_t, SegmentUsage>& held);
  std::shared_mutex& LockFor(const ChunkId& id);
  // Takes the chunk locks of `ids` (repeats allowed) as `Lock`
  // (std::unique_lock or std::shared_lock), each lock stripe once and in
  // address order: the order every path that holds several takes them in.
  template <typename Lock>
  std::vector<Lock> LockInOrder(const std::vector<ChunkId>& ids);
  Status CheckSpace(size_t len);
  void NoteMissing(const ChunkId& id, uint64_t version);
  Status NoSpaceStatus(const std::string& what);
  // Drops the index entry of a missing chunk (caller holds the chunk lock
  // exclusively).
  Status DropEntry(const ChunkId& id, uint64_t version);
  // Reads and CRC-verifies chunk (id, version) described by `v` (caller
  // holds the chunk lock). ENOENT only when its data is missing; EBADMSG
  // (counted) on any mismatch.
  Status ReadVerified(const ChunkId& id, uint64_t version,
                      const ChunkIndexValue& v, std::vector<uint8_t>* out);
  // Bytes [offset, offset + out.size()) of it into `out` (in range, checked
  // by the caller): with block CRCs only the covered blocks are read and
  // verified. On error `out` holds unspecified bytes.
  Status ReadVerifiedRange(const ChunkId& id, uint64_t version,
                           const ChunkIndexValue& v, uint32_t offset,
                           std::span<uint8_t> out);
  // ReadVerifiedRange in steps, so that a batch shares one submission:
  // PlanRange fills *rr (a legacy file is read there and then) or fails
  // (ENOENT: data missing); RunRangeReads runs the file reads of all of
  // `rrs` together; FinishRange checks them and the CRCs and copies out.
  // `v` and `out` must outlive *rr.
  Status PlanRange(const ChunkId& id, uint64_t version,
                   const ChunkIndexValue& v, uint32_t offset,
                   std::span<uint8_t> out, RangeRead* rr);
  // PlanRange's two cases: a legacy chunk file, read there and then; the
  // file reads of the segment pieces the range covers.
  Status ReadLegacyRange(RangeRead* rr);
  Status PlanSegmentReads(RangeRead* rr);
  void RunRangeReads(std::span<RangeRead* const> rrs);
  Status FinishRange(RangeRead* rr);
  // One file read's result: an error (annotated with `path`) or a short
  // read (EBADMSG, counted).
  Status CheckRangeRead(const RangeRead& rr, const RangeReadIo& io,
                        const std::string& path);
  // The entry of (id, version) when it holds [offset, offset + length):
  // ENOENT when absent, EINVAL past its end.
  // `cache_only`: as GetEntry.
  Status LookUpRange(const ChunkId& id, uint64_t version, uint32_t offset,
                     uint32_t length, ChunkIndexValue* v,
                     bool cache_only = false);
  // ReadChunk(Into): looks (id, version) up, checks the range, then reads
  // into `dest()` (called once the range is known to be valid, so nothing
  // is allocated for an impossible length).
  Status ReadRange(const ChunkId& id, uint64_t version, uint32_t offset,
                   uint32_t length,
                   const std::function<std::span<uint8_t>()>& dest);
  // Where a prepared op goes: committed as prepared (kReady), through the
  // one-op read+write default (kDefault: e.g. a patch of most of the
  // chunk), or nowhere yet: the space check failed (kNoSpace; the one-op
  // path compacts and retries).
  enum class Prep { kReady, kDefault, kNoSpace };
  // A chunk write's op (CRCs computed), committed as prepared.
  void InitWriteOp(const ChunkId& id, uint64_t version,
                   std::span<const uint8_t> data, CommitOp* op);
  // CloneChunk's and PatchChunk's work up to the commit (caller holds the
  // chunk lock exclusively): *op is ready to submit when *prep is kReady
  // and the status OK. A patch's new blocks go to *data (op->data).
  Status PrepareClone(const ChunkId& id, uint64_t from_version,
                      uint64_t to_version, uint32_t length, CommitOp* op,
                      bool* existed, Prep* prep);
  // A patch's new version: the source's pieces plus one new piece per
  // window (each range rounded out to CRC blocks, touching windows merged),
  // all windows written back to back in one extent. Only blocks the ranges
  // cover in part are read from the source. kDefault when the windows add
  // up to more than half the chunk or the version would have more than
  // kMaxChunkPieces pieces.
  Status PreparePatch(const ChunkId& id, uint64_t from_version,
                      uint64_t to_version, uint32_t length,
                      std::span<const PatchRange> ranges,
                      std::span<const uint8_t> bytes, CommitOp* op,
                      AlignedBytes* data, bool* existed, Prep* prep);
  // PreparePatch's read: into `data` (the windows back to back), the
  // source's bytes of every block the ranges cover only in part, one
  // CRC-verified read per run of such blocks.
  Status ReadPartlyCoveredBlocks(const ChunkId& id, uint64_t from_version,
                                 uint64_t to_version, const ChunkIndexValue& v,
                                 std::span<const PatchRange> ranges,
                                 const std::vector<PatchRange>& windows,
                                 AlignedBytes* data);
  // PatchChunk and PatchChunkRanges (ranges checked): one op under the
  // chunk lock, compacting and retrying once on a full store.
  Status PatchOne(const ChunkId& id, uint64_t from_version, uint64_t to_version,
                  uint32_t length, std::span<const PatchRange> ranges,
                  std::span<const uint8_t> bytes);
  // One ApplyChunkOps op prepared as above; kDefault also for whatever the
  // batch leaves to the one-op path (its errors, legacy sources, ...).
  Status PrepareBatchOp(const ChunkWriteOp& w, BatchOp* b, Prep* prep);
  // A patch that PreparePatch would store whole (its windows cover more
  // than half the chunk, or too many pieces): the source read whole
  // (CRC-verified) with the new bytes over it, prepared as a whole new
  // version in the batch, so it shares the batch's one sync round instead
  // of taking its own afterwards. kDefault for what the one-op path must
  // do (a resize, a legacy or missing source, a full store).
  Status PrepareWholePatch(const ChunkWriteOp& w, BatchOp* b, Prep* prep);
  // A committed write, clone or patch of a `length`-byte version in the
  // counters (a new chunk unless it `existed`).
  void CountStored(ChunkWriteOp::Kind kind, uint64_t length, bool existed);
  Status DeleteMatching(const ChunkId& id,
                        const std::function<bool(uint64_t)>& doomed);
  // The delete op of the versions of `id` that `doomed` picks (op->keys
  // empty when none), their counts, legacy files removed (chunk lock of
  // `id` held exclusively).
  Status PrepareDelete(const ChunkId& id,
                       const std::function<bool(uint64_t)>& doomed,
                       CommitOp* op, uint64_t* counted,
                       uint64_t* counted_bytes);
  // Looks up (id, version) (caller holds id's chunk lock) in the version
  // cache, which a miss fills from a scan of the id's versions: *found
  // false when absent; Corruption (counted) when malformed. `cache_only`:
  // from memory only (version cache, memtable, block cache); WouldBlock
  // when that would need disk I/O.
  Status GetEntry(const ChunkId& id, uint64_t version, bool* found,
                  ChunkIndexValue* v, bool cache_only = false);
  // The source of a clone or patch (`verb`) of `length` bytes: NotFound
  // when absent, EINVAL when it is shorter than `length`.
  Status GetSourceEntry(const ChunkId& id, uint64_t version, uint32_t length,
                        const char* verb, ChunkIndexValue* v);
  // For a clone or patch (`verb`) into (op->id, to_version): the other
  // versions go to op->others, an existing target to op->freed (EEXIST
  // unless it holds `length` bytes); *existed says whether there was one.
  // Caller holds the chunk lock.
  Status GatherForTarget(uint64_t to_version, uint32_t length, const char* verb,
                         CommitOp* op, bool* existed);
  // Every version of `id` that decodes, in version order (caller holds the
  // chunk lock): from the version cache, or scanned (ScanVersions) and put
  // in the cache when every entry of `id` decoded. `bad`, if not null, gets
  // the versions whose value does not decode (an id with any is never
  // cached).
  Status GatherVersions(const ChunkId& id,
                        std::vector<std::pair<uint64_t, ChunkIndexValue>>* out,
                        std::vector<uint64_t>* bad = nullptr);
  // GatherVersions without the copy: *cached is the cache's entry (null on
  // a miss, or without a cache), else *scanned holds the scan (which
  // filled the cache when clean). `cache_only` as for ScanVersions.
  using Versions = std::vector<std::pair<uint64_t, ChunkIndexValue>>;
  Status VersionsOf(const ChunkId& id, std::shared_ptr<const Versions>* cached,
                    Versions* scanned, std::vector<uint64_t>* bad = nullptr,
                    bool cache_only = false);
  // The index scan behind it (no cache): *clean false when a key or value
  // of `id` did not decode. `cache_only`: WouldBlock (and *clean false)
  // when the scan would need disk I/O.
  Status ScanVersions(const ChunkId& id,
                      std::vector<std::pair<uint64_t, ChunkIndexValue>>* out,
                      std::vector<uint64_t>* bad, bool* clean,
                      bool cache_only = false);
  // A synced write of one batch outside the commit thread (dropping entries
  // of missing chunks). Afterwards (whether it worked or not) the version
  // cache forgets every chunk id the batch touches (everything, when the
  // batch holds something other than puts and deletes of chunk keys).
  Status IndexWrite(const std::function<void(rocksdb::WriteBatch*)>& fill);
  // The version cache after a commit of `batch` (commit thread, each op's
  // chunk lock held by its submitter): ops that committed update their
  // entry (`encoded`: each op's value as written), the others drop it.
  void UpdateVersionCache(const std::vector<CommitOp*>& batch,
                          const std::vector<std::string>& encoded);

  // The group commit (group_commit.h, group_commit.cc). Once the op is done,
  // Submit punches the holes its commit left (op->holes) on the calling thread,
  // unless op->punch_later: then the caller calls PunchHoles, after letting
  // go of its chunk locks.
  Status Submit(CommitOp* op) STRIPEFS_EXCLUDES(queue_mu_);
  // Queues ops together (so they share one batch) and waits for all;
  // returns the first error, each op's is in op->status. Ops with data
  // must have been through WriteDataBatch. Holes as for Submit.
  Status SubmitAll(const std::vector<CommitOp*>& ops)
      STRIPEFS_EXCLUDES(queue_mu_);
  // Punches `holes` (segment ranges no version references any more) and
  // empties it; any thread, no lock needed (nothing ever references those
  // bytes again).
  void PunchHoles(std::vector<Hole>* holes);
  // The commit thread takes what queued up while the previous batch was
  // syncing and commits it (CommitBatch); the index thread runs the batch's
  // synced index write while the commit thread syncs its data.
  void CommitLoop() STRIPEFS_EXCLUDES(queue_mu_);
  void IndexLoop() STRIPEFS_EXCLUDES(queue_mu_);
  void CommitBatch(const std::vector<CommitOp*>& batch)
      STRIPEFS_EXCLUDES(queue_mu_);
  // CommitBatch's steps: the batch's WriteBatch (entries, the pending
  // record of the entries with new bytes, named *pending_key; true when
  // there are such); the sync round (the synced index write, on the index
  // thread while this one fdatasyncs the segments when `has_data`); the
  // ops' statuses, rollback of those whose data did not sync, the version
  // cache, live space and counters.
  bool FillIndexBatch(const std::vector<CommitOp*>& batch,
                      rocksdb::WriteBatch* wb,
                      std::vector<std::string>* encoded,
                      std::string* pending_key);
  Status SyncRound(const std::vector<CommitOp*>& batch, rocksdb::WriteBatch* wb,
                   bool has_data) STRIPEFS_EXCLUDES(queue_mu_);
  void FinishBatch(const std::vector<CommitOp*>& batch, const Status& st,
                   size_t confirmed, const std::string& pending_key,
                   const std::vector<std::string>& encoded);
  // The synced index write of `wb` (once more after giving up the index
  // reserve on ENOSPC).
  Status WriteIndexBatch(rocksdb::WriteBatch* wb);
  // After the batch's data sync failed for some ops whose entries were
  // written: puts back what they replaced (or deletes them), synced.
  Status RollBack(const std::vector<const CommitOp*>& failed);
  // Appends op's bytes to a fresh extent (submitting thread).
  Status WriteData(CommitOp* op);
  // The fd op's bytes are written through: the buffered one for a small
  // extent (options_.buffered_write_max_bytes; counted), else write_fd.
  int PickWriteFd(const CommitOp& op, const SegmentFile& f);
  // WriteData for every op of `ops` with bytes, all writes in one io_uring
  // submission; each op's status says whether its bytes are down (ENOSPC:
  // no extent). Ops without bytes get an OK status.
  void WriteDataBatch(const std::vector<CommitOp*>& ops);
  // WriteData's steps: the extent and the op's pieces; the counters (and
  // on error, giving the extent back) once the write `st` is done, which
  // took `write_ns`.
  Status PlaceData(CommitOp* op);
  Status DataWritten(CommitOp* op, const SegmentFile& f, Status st,
                     uint64_t write_ns);
  // fdatasyncs every segment the batch wrote to, once; fails the ops whose
  // segment did not sync.
  void SyncBatchData(const std::vector<CommitOp*>& batch);
  // After a commit (or a dropped entry): the live bytes and entries of the
  // segments the op changed, from op.others and op.freed; the ranges no
  // version references any more go to op.holes (punched by the submitter,
  // not here: the commit thread must not wait for hole punching, which on
  // ext4 also waits for the segment's in-flight direct writes).
  void ApplyLive(CommitOp& op);
  // The index reserve file: given up when the index is full, taken again
  // (best effort) once space was freed.
  bool ReleaseIndexReserve();
  void RestoreIndexReserve();
  void CompactLoop() STRIPEFS_EXCLUDES(queue_mu_, compact_mu_);
  // Moves the live chunks out of segment `seq`, at most `bytes_per_sec`
  // (0: no limit).
  void CompactSegment(uint64_t seq, uint64_t bytes_per_sec,
                      CompactionReport* rep) STRIPEFS_REQUIRES(compact_mu_);
  // Moves every version of `id` with a piece in segment `seq` out of it.
  void RelocateChunk(const ChunkId& id, uint64_t seq, CompactionReport* rep)
      STRIPEFS_REQUIRES(compact_mu_);
  bool stopping() STRIPEFS_EXCLUDES(queue_mu_);

  const std::string dir_;
  const std::string data_dir_;
  const std::string tmp_dir_;
  const ChunkStoreOptions options_;
  uint64_t reserve_bytes_ = 0;  // options_.reserve_bytes resolved at Open()
  int lock_fd_ = -1;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<UringFileIo> io_;
  std::unique_ptr<SegmentSet> segments_;
  UniqueFd reserve_fd_;
  bool reserve_held_ = false;  // commit thread (and Open) only

  static constexpr size_t kLockStripes = 256;
  std::array<std::shared_mutex, kLockStripes> chunk_locks_;
  // Null when options_.version_cache_bytes is 0.
  std::unique_ptr<ChunkVersionCache> version_cache_;

  // The group commit's queue and its hand-offs to the commit and index
  // threads (and each queued CommitOp's `done`, which the analysis cannot
  // name). Taken after chunk locks, before the parts' own mutexes.
  mutable Mutex queue_mu_;
  std::condition_variable queue_cv_;  // work for the commit thread
  std::condition_variable stop_cv_;   // the compactor's sleep ends early
  std::vector<CommitOp*> queue_ STRIPEFS_GUARDED_BY(queue_mu_);
  std::condition_variable index_cv_;  // index job posted / done
  rocksdb::WriteBatch* index_job_ STRIPEFS_GUARDED_BY(queue_mu_) = nullptr;
  bool index_job_done_ STRIPEFS_GUARDED_BY(queue_mu_) = false;
  Status index_job_status_ STRIPEFS_GUARDED_BY(queue_mu_);
  bool stop_ STRIPEFS_GUARDED_BY(queue_mu_) = false;
  bool committer_done_ STRIPEFS_GUARDED_BY(queue_mu_) = false;
  // Commit thread only: the next pending record's number, and the records
  // of acknowledged batches (deleted by the next WriteBatch or at Close).
  uint64_t next_pending_ = 1;
  std::vector<std::string> confirmed_pending_;
  std::thread committer_;
  std::thread indexer_;
  Mutex compact_mu_;  // one compaction at a time
  std::thread compactor_;

  std::atomic<uint64_t> chunks_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> crc_errors_{0};
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> writes_{0};
  // The counters of ChunkStoreCounters the store keeps itself
  // (chunk_store_counters.h).
  ChunkStoreAtomicCounters counters_;
};

template <typename Lock>
std::vector<Lock> ChunkStore::LockInOrder(const std::vector<ChunkId>& ids) {
  std::vector<std::shared_mutex*> mutexes;
  mutexes.reserve(ids.size());
  for (const ChunkId& id : ids) mutexes.push_back(&LockFor(id));
  std::sort(mutexes.begin(), mutexes.end());
  mutexes.erase(std::unique(mutexes.begin(), mutexes.end()), mutexes.end());
  std::vector<Lock> locks;
  locks.reserve(mutexes.size());
  for (std::shared_mutex* m : mutexes) locks.emplace_back(*m);
  return locks;
}

}  // namespace stripefs

// SegmentSet: the append-only segment files of one chunk store, and what
// each of them holds.
//
// Chunks are appended to the one active segment at kSegmentAlign-aligned
// offsets; a segment is preallocated (fallocate) to `segment_bytes` when it
// is created, and its directory entry is made durable then, once per
// segment, never per chunk. A segment that is not active is sealed: nothing
// is appended to it again (every segment found at open is sealed, so bytes
// past the last committed entry are never reused, only cut off).
//
// Accounting: `live` counts the bytes the index entries reference in a
// segment (bytes shared by versions of one chunk count once; the owner works
// that out) and the entries with a piece there (one per entry), `end` is
// how far it has been written. A sealed segment with no live entry
// and no write in flight is unlinked. The owner (ChunkStore) keeps the
// counts in step with the index: AddLive after an entry is committed,
// RemoveLive after it is deleted or moved.
//
// Spares: `fdatasync` after `O_DIRECT` writes into fallocated (unwritten)
// extents must commit the extents' conversion to written in the file
// system's journal, a second journal commit per batch besides the index's.
// With `spare_segments` > 0 a filler thread (StartFiller) keeps that many
// zero-filled, synced files ready once a second segment was started since
// open (so idle stores write no zeros), and Roll renames one into the next
// segment, whose data syncs are then cache flushes only. A spare is only
// made while the file system has `spare_min_free_bytes` free; without one,
// Roll preallocates as before. Spares are never referenced by the index: a
// crash leaves them for the next open to reuse (finished) or remove (tmp).
//
// Thread-safety: all methods may be called concurrently (one mutex).
// Allocate is meant for the store's single commit thread. Files are shared
// with readers through shared_ptr, so a reader keeps a segment readable
// while it is being unlinked.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"

namespace stripefs {

struct SegmentFile {
  uint64_t seq = 0;
  std::string path;
  // O_DIRECT when the file system takes it (`direct`); ChunkStore also
  // reads large aligned ranges through it.
  UniqueFd write_fd;
  // Through the page cache: small reads, and writes that should stay
  // readable from memory (ChunkStoreOptions::buffered_write_max_bytes).
  UniqueFd buffered_fd;
  bool direct = false;
};

struct SegmentUsage {
  uint64_t live_bytes = 0;  // extents of live entries (aligned sizes)
  uint64_t live_entries = 0;
  uint64_t end = 0;      // bytes written (or, at open, the last entry's end)
  uint64_t punched = 0;  // dead bytes already given back (PUNCH_HOLE)
};

struct SegmentInfo {
  uint64_t seq = 0;
  SegmentUsage usage;
  uint64_t pending = 0;  // allocated extents not yet settled
  bool sealed = false;
};

struct SegmentExtent {
  uint64_t segment = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

class SegmentSet {
 public:
  struct Options {
    uint64_t segment_bytes = uint64_t{64} << 20;
    bool use_direct_io = true;
    uint32_t spare_segments = 0;
    uint64_t spare_min_free_bytes = 0;
  };
  SegmentSet(std::string dir, const Options& options);
  ~SegmentSet();  // stops the filler (an unfinished spare stays tmp)
  SegmentSet(const SegmentSet&) = delete;
  SegmentSet& operator=(const SegmentSet&) = delete;

  // Opens every segment file in the directory, sealed, with `usage` (from
  // the index scan). Files no entry points to are removed, tails past the
  // last entry are cut off. Returns the segments the index names that have
  // no file (their entries are missing chunks).
  // Finished spares are kept (up to spare_segments), tmp ones removed.
  Result<std::vector<uint64_t>> Load(
      const std::map<uint64_t, SegmentUsage>& usage, uint64_t* removed);
  // Starts the filler thread when spare_segments > 0 (after Load).
  void StartFiller();

  // Reserves `bytes` (a multiple of kSegmentAlign) in the active segment,
  // first rolling to a new, preallocated one when it does not fit. The
  // extent stays pending until Settle. ENOSPC when no segment can be made.
  // An empty chunk gets segment 0, which names no file.
  Result<SegmentExtent> Allocate(uint64_t bytes) STRIPEFS_EXCLUDES(mu_);
  // Ends the pending state of an extent from Allocate.
  void Settle(const SegmentExtent& e) STRIPEFS_EXCLUDES(mu_);
  void AddLive(uint64_t seq, uint64_t bytes, uint64_t entries)
      STRIPEFS_EXCLUDES(mu_);
  void RemoveLive(uint64_t seq, uint64_t bytes, uint64_t entries)
      STRIPEFS_EXCLUDES(mu_);
  void NotePunched(uint64_t seq, uint64_t bytes) STRIPEFS_EXCLUDES(mu_);
  // The next Allocate starts a new segment (so the active one can be
  // compacted).
  void SealActive() STRIPEFS_EXCLUDES(mu_);

  // Null when there is no such segment.
  std::shared_ptr<SegmentFile> Get(uint64_t seq) STRIPEFS_EXCLUDES(mu_);
  std::vector<SegmentInfo> List() STRIPEFS_EXCLUDES(mu_);
  // Sealed segments whose live bytes are below `max_live_fraction` of what
  // they still occupy (end minus punched holes), most dead first.
  std::vector<uint64_t> CompactionCandidates(double max_live_fraction);
  // Unlinks every sealed, unused segment; returns how many.
  uint64_t RemoveDead() STRIPEFS_EXCLUDES(mu_);
  uint64_t removed() const;
  // Segments that started from a spare; spares zero-filled.
  uint64_t rolled_onto_spares() const;
  uint64_t spares_filled() const;

 private:
  struct Segment {
    std::shared_ptr<SegmentFile> file;
    SegmentUsage usage;
    uint64_t capacity = 0;  // preallocated size
    uint64_t pending = 0;
    bool sealed = false;
  };
  Result<std::shared_ptr<SegmentFile>> OpenFile(uint64_t seq, bool create);
  Status Roll(uint64_t at_least) STRIPEFS_REQUIRES(mu_);
  // A ready spare renamed to segment `seq`, with its capacity; null when
  // there is none that holds `at_least` (mu_ held).
  std::shared_ptr<SegmentFile> TakeSpareLocked(uint64_t seq, uint64_t at_least,
                                               uint64_t* capacity)
      STRIPEFS_REQUIRES(mu_);
  void FillLoop() STRIPEFS_EXCLUDES(mu_);
  // Writes segment_bytes of zeros into a new tmp file, syncs it and renames
  // it to spare `n`; returns its path.
  Result<std::string> FillSpare(uint64_t n);
  bool RoomForSpare() const;
  void SealActiveLocked() STRIPEFS_REQUIRES(mu_);
  // Unlinks `seq` when sealed and unused (mu_ held).
  void MaybeRemoveLocked(uint64_t seq) STRIPEFS_REQUIRES(mu_);

  const std::string dir_;
  const Options options_;
  mutable Mutex mu_;
  std::map<uint64_t, Segment> segments_ STRIPEFS_GUARDED_BY(mu_);
  uint64_t active_ STRIPEFS_GUARDED_BY(mu_) = 0;  // 0: none
  uint64_t next_seq_ STRIPEFS_GUARDED_BY(mu_) = 1;
  uint64_t removed_ STRIPEFS_GUARDED_BY(mu_) = 0;
  std::vector<std::string> spares_
      STRIPEFS_GUARDED_BY(mu_);  // ready spare paths
  uint64_t next_spare_ STRIPEFS_GUARDED_BY(mu_) = 1;
  uint64_t rolls_ STRIPEFS_GUARDED_BY(mu_) = 0;  // segments started since open
  uint64_t rolled_onto_spares_ STRIPEFS_GUARDED_BY(mu_) = 0;
  uint64_t spares_filled_ STRIPEFS_GUARDED_BY(mu_) = 0;
  bool stop_ STRIPEFS_GUARDED_BY(mu_) = false;
  std::atomic<bool> stop_fill_{false};
  std::condition_variable fill_cv_;  // a spare was taken, or stopping
  std::thread filler_;
};

}  // namespace stripefs

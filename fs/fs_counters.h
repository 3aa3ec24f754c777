// FsCounters: what the mounted file system saw (WRITE shapes relative to
// the stripe grid, READs, error replies by errno), and StatsJson(): the one
// JSON document `stripefs stat` shows, combining these with the coalescing
// counters, the stripe client's counters and the FUSE engine's negotiated
// settings and per-queue counts.
//
// Definitions (S = stripe size = k * cell size; a WRITE covers
// [offset, offset + size)):
//   aligned        offset % S == 0 and size % S == 0: the request is made of
//                  whole stripes only, so the backend can encode it without
//                  reading (what opt-alignment aims for).
//   start_aligned  offset % S == 0 (any size).
//   crossing       the request straddles a stripe boundary that it neither
//                  starts nor ends on: (offset / S) != ((end - 1) / S) and it
//                  is not aligned -- each such WRITE touches two partial
//                  stripes.
//   short          size < the negotiated max_write: the requests that shift
//                  later writeback off the stripe grid.
//   writeback      carried FUSE_WRITE_CACHE (page-cache writeback); the rest
//                  are direct (O_DIRECT or no writeback cache).
// Thread-safety: relaxed atomics, bumped from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "backend/client/client_counters.h"
#include "fs/stripe_writer.h"
#include "fuse/session_info.h"

namespace stripefs::fs {

inline constexpr int kErrnoSlots = 160;

struct FsCounters {
  std::atomic<uint64_t> write_requests{0};
  std::atomic<uint64_t> write_aligned{0};
  std::atomic<uint64_t> write_start_aligned{0};
  std::atomic<uint64_t> write_crossing{0};
  std::atomic<uint64_t> write_short{0};
  std::atomic<uint64_t> write_writeback{0};
  std::atomic<uint64_t> write_bytes{0};
  std::atomic<uint64_t> read_requests{0};
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> negative_lookups{0};  // LOOKUP answered ENOENT
  std::atomic<uint64_t> inodes_purged{0};
  std::atomic<uint64_t> orphans_purged_at_mount{0};  // queued at start
  std::atomic<uint64_t> purge_errors{0};
  // Metadata calls saved around namespace changes (docs/filesystem.md):
  // directory GETATTRs answered from the attributes a CreateEntry,
  // UnlinkEntry, LinkEntry or RenameEntry returned, and the kernel's time
  // flushes on a file this mount unlinked (nlink 0, not open) answered without
  // a SetAttr.
  std::atomic<uint64_t> dir_attrs_from_changes{0};
  std::atomic<uint64_t> unlink_times_folded{0};
  // ... and time flushes after an unlink, link or rename that left the
  // inode linked, answered from the change's attributes (FoldTimeFlush).
  std::atomic<uint64_t> entry_times_folded{0};
  // Creates that took the several-call path: the parent has a default ACL,
  // or the metadata service has no CreateEntry (an older metad).
  std::atomic<uint64_t> create_fallbacks{0};
  // Attribute replies whose st_blocks came from the count kept at the
  // file's change marker instead of a scan of its stripe map.
  std::atomic<uint64_t> stored_bytes_kept{0};
  // Another client's growth of a file pushed into the kernel's i_size
  // (writeback cache; GrowthNotifier), and pushes that did not complete in
  // time or failed.
  std::atomic<uint64_t> growth_shown{0};
  std::atomic<uint64_t> growth_not_shown{0};
  std::atomic<uint64_t> errors[kErrnoSlots]{};  // error replies by errno

  // Classifies and counts one WRITE.
  void CountWrite(uint64_t offset, uint64_t size, uint64_t stripe_size,
                  uint32_t max_write, bool writeback);
  void CountError(int err) {
    if (err > 0 && err < kErrnoSlots)
      errors[err].fetch_add(1, std::memory_order_relaxed);
  }
};

// Everything the daemon reports, gathered by StripeFs::StatsJson().
struct StatsInputs {
  // volume
  std::string volume;  // Volume::description()
  uint32_t k = 0, m = 0, cell_size = 0;
  uint64_t stripe_size = 0;
  std::string mountpoint;
  int pid = 0;
  // file system
  bool coalesce = true;
  uint64_t idle_flush_ms = 0;
  uint64_t frontier_hold_ms = 0;
  uint64_t memory_cap = 0;
  uint64_t send_window = 0, file_send_window = 0;  // as resolved
  uint64_t buffered_bytes = 0;
  uint64_t live_writers = 0;  // StripeWriters (files being written)
  uint64_t cached_attrs = 0;  // AttrCache entries
  const FsCounters* fs = nullptr;
  const CoalesceCounters* coalesce_counters = nullptr;
  ClientCountersSnapshot client;
  // metad outages (present with a hold time: HoldingMetaService): metadata
  // calls that waited for metad, and those that gave up with EIO.
  // And (cluster) connections that failed over to another metad.
  bool has_meta_hold = false;
  uint64_t meta_held_calls = 0, meta_expired_calls = 0, meta_failovers = 0;
  // engine (absent when no session is attached)
  bool has_engine = false;
  fuse::EngineStats engine;
};

nlohmann::json StatsJson(const StatsInputs& in);

}  // namespace stripefs::fs

// The chunk store's counters as ONE list: STRIPEFS_CHUNK_STORE_COUNTERS
// generates the snapshot struct (ChunkStoreCounters), the store's atomics
// (ChunkStoreAtomicCounters) and the Prometheus families daemon_metrics.cc
// exports (kChunkStoreCounterMetrics), so a counter is added in one row.
//
// A row: X(field, metric, stem, help)
// - field: the ChunkStoreCounters member (and the atomic's name);
// - metric: kNone (not exported), kCounter (a "_total" family), kSeconds
//   (a nanosecond count exported as a "_seconds_total" family, in
//   seconds), kGauge;
// - stem: the family name after "stripefs_chunk_engine_" ("" for kNone);
// - help: what it counts (also the family's help text).
// Rows of STRIPEFS_CHUNK_STORE_PART_COUNTERS are kept by the store's parts
// (SegmentSet, UringFileIo, ChunkVersionCache) and copied into the snapshot
// by ChunkStore::Counters(); they have no atomic here. The version cache's
// are all 0 without a cache. buffered_writes counts the data_writes small
// enough (ChunkStoreOptions::buffered_write_max_bytes) to go through the
// page cache into a segment that takes O_DIRECT.
//
// Counters count since Open unless the help says otherwise. Thread-safety:
// the atomics are updated with relaxed order; a snapshot is not atomic as a
// whole (each field is read once).
#pragma once

#include <atomic>
#include <cstdint>

namespace stripefs {

enum class ChunkCounterMetric { kNone, kCounter, kSeconds, kGauge };

// Times are in nanoseconds summed over all threads (divide by the count the
// help names): writers' segment writes, staging copy included; an op's
// wait from being queued until a batch takes it (queue_ns) and until it is
// acknowledged (commit_wait_ns); batches, from taken to acknowledged; the
// fdatasyncs and synced index writes.
#define STRIPEFS_CHUNK_STORE_OWN_COUNTERS(X)                                   \
  X(missing_chunks, kNone, "", "index entries whose data was gone")            \
  X(malformed_entries, kNone, "", "index keys/values that failed decoding")    \
  X(nospace_refusals, kNone, "", "writes refused or failed with ENOSPC")       \
  X(orphans_removed, kNone, "", "legacy data files without index entry")       \
  X(temp_files_removed, kNone, "", "leftovers in the legacy tmp/")             \
  X(clones_shared, kNone, "", "CloneChunk calls served by sharing")            \
  X(patches_in_place, kCounter, "patches_in_place",                            \
    "patches that wrote only their window")                                    \
  X(patches_whole, kCounter, "patches_whole",                                  \
    "patches that rewrote the whole chunk")                                    \
  X(bytes_written, kNone, "", "chunk bytes written to segments")               \
  X(commit_batches, kCounter, "commit_batches",                                \
    "group commits (one data and one index sync round)")                       \
  X(committed_ops, kCounter, "committed_ops",                                  \
    "ops acknowledged by group commits")                                       \
  X(data_syncs, kCounter, "data_syncs", "segment fdatasyncs")                  \
  X(index_syncs, kCounter, "index_syncs", "synced index (RocksDB WAL) writes") \
  X(data_writes, kCounter, "data_writes", "segment writes by writers")         \
  X(buffered_writes, kCounter, "buffered_writes",                              \
    "segment writes small enough to go through the page cache")                \
  X(data_write_ns, kSeconds, "data_write_seconds",                             \
    "time in segment writes (per data_writes)")                                \
  X(queue_ns, kSeconds, "queue_seconds",                                       \
    "ops' wait until a group commit took them (per committed_ops)")            \
  X(commit_wait_ns, kSeconds, "commit_wait_seconds",                           \
    "ops' wait until acknowledged (per committed_ops)")                        \
  X(batch_ns, kSeconds, "batch_seconds",                                       \
    "group commits from taken to acknowledged (per commit_batches)")           \
  X(data_sync_ns, kSeconds, "data_sync_seconds",                               \
    "time in segment fdatasyncs (per data_syncs)")                             \
  X(index_sync_ns, kSeconds, "index_sync_seconds",                             \
    "time in synced index writes (per index_syncs)")                           \
  X(pending_records, kNone, "", "pending records found at Open")               \
  X(pending_verified, kNone, "",                                               \
    "entries pending records named that verified at Open")                     \
  X(pending_rolled_back, kNone, "",                                            \
    "entries pending records named that Open rolled back")                     \
  X(holes_punched, kNone, "", "dead segment ranges punched out")               \
  X(chunks_relocated, kNone, "", "chunk versions moved by compaction")         \
  X(direct_read_bytes, kNone, "", "chunk bytes read with O_DIRECT")            \
  X(read_batches, kNone, "", "ReadChunkRanges calls")                          \
  X(batched_ops, kCounter, "batched_ops",                                      \
    "ops committed through an ApplyChunkOps batch")

#define STRIPEFS_CHUNK_STORE_PART_COUNTERS(X)                    \
  X(segments_removed, kNone, "", "segment files removed")        \
  X(segments_from_spares, kNone, "",                             \
    "segments started as a zero-filled spare")                   \
  X(spares_filled, kNone, "", "zero-filled spare segments made") \
  X(data_submissions, kNone, "",                                 \
    "io_uring submissions of segment reads and writes")          \
  X(version_cache_hits, kCounter, "version_cache_hits",          \
    "version lookups served from the version cache")             \
  X(version_cache_misses, kCounter, "version_cache_misses",      \
    "version lookups that scanned the index")                    \
  X(version_cache_evictions, kNone, "",                          \
    "version cache entries evicted to stay under its bound")     \
  X(version_cache_bytes, kGauge, "version_cache_bytes",          \
    "bytes held by the version cache")                           \
  X(version_cache_entries, kNone, "", "chunk ids the version cache holds")

#define STRIPEFS_CHUNK_STORE_COUNTERS(X) \
  STRIPEFS_CHUNK_STORE_OWN_COUNTERS(X)   \
  STRIPEFS_CHUNK_STORE_PART_COUNTERS(X)

// A snapshot of every counter (ChunkStore::Counters()).
struct ChunkStoreCounters {
#define STRIPEFS_X(field, metric, stem, help) uint64_t field = 0;
  STRIPEFS_CHUNK_STORE_COUNTERS(STRIPEFS_X)
#undef STRIPEFS_X
};

// The counters the store keeps itself.
struct ChunkStoreAtomicCounters {
#define STRIPEFS_X(field, metric, stem, help) std::atomic<uint64_t> field{0};
  STRIPEFS_CHUNK_STORE_OWN_COUNTERS(STRIPEFS_X)
#undef STRIPEFS_X
  // Copies the atomics into `out` (the part counters are left alone).
  void SnapshotInto(ChunkStoreCounters* out) const {
#define STRIPEFS_X(field, metric, stem, help) out->field = field.load();
    STRIPEFS_CHUNK_STORE_OWN_COUNTERS(STRIPEFS_X)
#undef STRIPEFS_X
  }
};

// One exported counter: its family name after "stripefs_chunk_engine_"
// (plus "_total" unless a gauge), help, kind and field.
struct ChunkCounterMetricRow {
  const char* stem;
  const char* help;
  ChunkCounterMetric metric;
  uint64_t ChunkStoreCounters::*field;
};

// Every row of the list, kNone included (skip those when exporting).
inline constexpr ChunkCounterMetricRow kChunkStoreCounterRows[] = {
#define STRIPEFS_X(field, metric, stem, help) \
  {stem, help, ChunkCounterMetric::metric, &ChunkStoreCounters::field},
    STRIPEFS_CHUNK_STORE_COUNTERS(STRIPEFS_X)
#undef STRIPEFS_X
};

}  // namespace stripefs

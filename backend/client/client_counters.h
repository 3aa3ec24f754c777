// ClientCounters: what the stripe client did, for `stripefs stat` and the
// benchmarks. Relaxed atomics: cheap to bump from any thread; a snapshot is
// not a consistent cut across counters.
#pragma once

#include <atomic>
#include <cstdint>

namespace stripefs {

struct ClientCountersSnapshot {
  uint64_t full_stripe_writes = 0;   // whole stripe encoded, nothing read
  uint64_t new_partial_stripes = 0;  // partial stripe with no old data
  uint64_t rmw_stripes = 0;          // read-modify-write re-encodes
  uint64_t rmw_bytes_read = 0;       // old bytes read for RMW/parity delta
  uint64_t parity_delta_updates = 0;
  uint64_t degraded_writes = 0;    // committed with chunks missing
  uint64_t failed_writes = 0;      // more than m chunks failed: EIO
  uint64_t commit_conflicts = 0;   // CAS retries (concurrent writers)
  uint64_t degraded_reads = 0;     // reads that reconstructed data
  uint64_t chunk_read_errors = 0;  // chunk reads that failed (any cause)
  uint64_t crc_errors = 0;         // of which CRC mismatches
  uint64_t chunk_write_errors = 0;
  uint64_t bytes_written = 0;  // logical bytes
  uint64_t bytes_read = 0;
  uint64_t gc_chunk_deletes = 0;
  uint64_t gc_errors = 0;
  uint64_t slow_chunk_reads = 0;       // not answered within read_deadline
  uint64_t abandoned_chunk_reads = 0;  // still running when the read returned
  uint64_t map_updates = 0;            // cluster map changes picked up
  uint64_t hedged_chunk_reads = 0;  // reads of a suspect server not waited for
  uint64_t stripe_map_hits = 0;     // reads whose stripe map was cached
  uint64_t stripe_map_misses = 0;   // ... that asked metadata for it
  uint64_t read_ahead_loads = 0;    // whole stripes read ahead
  uint64_t degraded_stripe_loads = 0;  // degraded stripes loaded whole
  uint64_t stripe_cache_hits = 0;      // stripe reads served from those
  uint64_t stripe_cache_bytes = 0;     // bytes the stripe data cache holds
  // Degraded commits (degraded_queue.h): noted for background repair,
  // healed, dropped because the queue was full, held now; and writes
  // refused with ENOSPC instead (StripeClientOptions::refuse_degraded_enospc).
  uint64_t degraded_queued = 0;
  uint64_t degraded_repaired = 0;
  uint64_t degraded_queue_overflow = 0;
  uint64_t still_degraded = 0;
  uint64_t degraded_refused = 0;
};

struct ClientCounters {
#define STRIPEFS_CLIENT_COUNTER(name) std::atomic<uint64_t> name{0};
  STRIPEFS_CLIENT_COUNTER(full_stripe_writes)
  STRIPEFS_CLIENT_COUNTER(new_partial_stripes)
  STRIPEFS_CLIENT_COUNTER(rmw_stripes)
  STRIPEFS_CLIENT_COUNTER(rmw_bytes_read)
  STRIPEFS_CLIENT_COUNTER(parity_delta_updates)
  STRIPEFS_CLIENT_COUNTER(degraded_writes)
  STRIPEFS_CLIENT_COUNTER(failed_writes)
  STRIPEFS_CLIENT_COUNTER(commit_conflicts)
  STRIPEFS_CLIENT_COUNTER(degraded_reads)
  STRIPEFS_CLIENT_COUNTER(chunk_read_errors)
  STRIPEFS_CLIENT_COUNTER(crc_errors)
  STRIPEFS_CLIENT_COUNTER(chunk_write_errors)
  STRIPEFS_CLIENT_COUNTER(bytes_written)
  STRIPEFS_CLIENT_COUNTER(bytes_read)
  STRIPEFS_CLIENT_COUNTER(gc_chunk_deletes)
  STRIPEFS_CLIENT_COUNTER(gc_errors)
  STRIPEFS_CLIENT_COUNTER(slow_chunk_reads)
  STRIPEFS_CLIENT_COUNTER(abandoned_chunk_reads)
  STRIPEFS_CLIENT_COUNTER(map_updates)
  STRIPEFS_CLIENT_COUNTER(hedged_chunk_reads)
  STRIPEFS_CLIENT_COUNTER(read_ahead_loads)
  STRIPEFS_CLIENT_COUNTER(degraded_stripe_loads)
  STRIPEFS_CLIENT_COUNTER(stripe_cache_hits)
  STRIPEFS_CLIENT_COUNTER(degraded_queued)
  STRIPEFS_CLIENT_COUNTER(degraded_repaired)
  STRIPEFS_CLIENT_COUNTER(degraded_queue_overflow)
  STRIPEFS_CLIENT_COUNTER(degraded_refused)
#undef STRIPEFS_CLIENT_COUNTER

  static void Add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  ClientCountersSnapshot Snapshot() const {
    ClientCountersSnapshot s;
    auto ld = [](const std::atomic<uint64_t>& a) {
      return a.load(std::memory_order_relaxed);
    };
    s.full_stripe_writes = ld(full_stripe_writes);
    s.new_partial_stripes = ld(new_partial_stripes);
    s.rmw_stripes = ld(rmw_stripes);
    s.rmw_bytes_read = ld(rmw_bytes_read);
    s.parity_delta_updates = ld(parity_delta_updates);
    s.degraded_writes = ld(degraded_writes);
    s.failed_writes = ld(failed_writes);
    s.commit_conflicts = ld(commit_conflicts);
    s.degraded_reads = ld(degraded_reads);
    s.chunk_read_errors = ld(chunk_read_errors);
    s.crc_errors = ld(crc_errors);
    s.chunk_write_errors = ld(chunk_write_errors);
    s.bytes_written = ld(bytes_written);
    s.bytes_read = ld(bytes_read);
    s.gc_chunk_deletes = ld(gc_chunk_deletes);
    s.gc_errors = ld(gc_errors);
    s.slow_chunk_reads = ld(slow_chunk_reads);
    s.abandoned_chunk_reads = ld(abandoned_chunk_reads);
    s.map_updates = ld(map_updates);
    s.hedged_chunk_reads = ld(hedged_chunk_reads);
    s.read_ahead_loads = ld(read_ahead_loads);
    s.degraded_stripe_loads = ld(degraded_stripe_loads);
    s.stripe_cache_hits = ld(stripe_cache_hits);
    s.degraded_queued = ld(degraded_queued);
    s.degraded_repaired = ld(degraded_repaired);
    s.degraded_queue_overflow = ld(degraded_queue_overflow);
    s.degraded_refused = ld(degraded_refused);
    return s;
  }
};

}  // namespace stripefs

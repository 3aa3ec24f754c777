#include "fs/fs_counters.h"

#include <cstring>
#include <string>

#include "fuse/request_parser.h"

namespace stripefs::fs {

namespace {
void Bump(std::atomic<uint64_t>& c) {
  c.fetch_add(1, std::memory_order_relaxed);
}
uint64_t Ld(const std::atomic<uint64_t>& c) {
  return c.load(std::memory_order_relaxed);
}
}  // namespace

void FsCounters::CountWrite(uint64_t offset, uint64_t size,
                            uint64_t stripe_size, uint32_t max_write,
                            bool writeback) {
  Bump(write_requests);
  write_bytes.fetch_add(size, std::memory_order_relaxed);
  if (writeback) Bump(write_writeback);
  if (max_write != 0 && size < max_write) Bump(write_short);
  if (size == 0 || stripe_size == 0) return;
  const bool starts = offset % stripe_size == 0;
  if (starts) Bump(write_start_aligned);
  const bool aligned = starts && size % stripe_size == 0;
  if (aligned) {
    Bump(write_aligned);
    return;
  }
  const uint64_t end = offset + size;
  const uint64_t first = offset / stripe_size, last = (end - 1) / stripe_size;
  if (first != last) Bump(write_crossing);
}

namespace {

using nlohmann::json;

// "negotiated", "queues", "requests_by_opcode" and "engine": the FUSE
// session's INIT agreement and request counts.
void AddEngine(const StatsInputs& in, json& j) {
  const auto& n = in.engine.negotiated;
  json neg;
  neg["initialized"] = in.engine.initialized;
  neg["protocol"] = std::to_string(n.kernel_major) + "." +
                    std::to_string(n.minor) + " (kernel offers 7." +
                    std::to_string(n.kernel_minor) + ")";
  neg["max_write"] = n.max_write;
  neg["max_pages"] = n.max_pages;
  neg["max_readahead"] = n.max_readahead;
  neg["max_background"] = n.max_background;
  neg["writeback_cache"] = n.writeback_cache();
  neg["alignment_requested"] = n.align_requested;
  neg["alignment_acknowledged"] = n.align_acknowledged;
  neg["alignment_bytes"] =
      n.align_page_order ? (uint64_t{1} << n.align_page_order) : 0;
  neg["alignment_offset"] = n.align_offset;
  neg["uring_offered"] = n.uring_offered;
  neg["compound_offered"] = n.Offered(fuse_abi::FUSE_HAS_COMPOUND);
  neg["compound_agreed"] = n.Has(fuse_abi::FUSE_HAS_COMPOUND);
  neg["transport"] = in.engine.transport;
  neg["uring_queues"] = in.engine.uring_queues;  // 0 on /dev/fuse
  neg["uring_reduced_offered"] = n.Offered(fuse_abi::FUSE_URING_REDUCED_Q);
  neg["flags"] = fuse::InitFlagNames(n.flags);
  j["negotiated"] = neg;
  json queues = json::array();
  for (const auto& q : in.engine.queues) {
    queues.push_back({{"transport", q.transport},
                      {"queue", q.queue},
                      {"requests", q.requests},
                      {"foreground", q.foreground},
                      {"background", q.background}});
  }
  j["queues"] = queues;
  json ops = json::object();
  for (uint32_t op = 0; op < in.engine.per_opcode.size(); ++op) {
    if (in.engine.per_opcode[op] == 0) continue;
    ops[std::string(fuse::OpcodeName(op))] = in.engine.per_opcode[op];
  }
  j["requests_by_opcode"] = ops;
  j["engine"] = {{"unknown_opcode", in.engine.unknown_opcode},
                 {"malformed", in.engine.malformed},
                 {"interrupts", in.engine.interrupts},
                 {"uring_reads_inline", in.engine.uring_reads_inline},
                 {"uring_reads_handed", in.engine.uring_reads_handed},
                 {"uring_read_tries", in.engine.uring_read_tries},
                 {"uring_read_would_block", in.engine.uring_read_would_block}};
}

// "writes", "reads", "errors" and "inodes": the file system's counters.
void AddFsCounters(const StatsInputs& in, json& j) {
  const FsCounters& f = *in.fs;
  const uint64_t reqs = Ld(f.write_requests);
  const uint64_t bytes = Ld(f.write_bytes);
  j["writes"] = {
      {"requests", reqs},
      {"aligned", Ld(f.write_aligned)},
      {"start_aligned", Ld(f.write_start_aligned)},
      {"crossing", Ld(f.write_crossing)},
      {"short", Ld(f.write_short)},
      {"writeback", Ld(f.write_writeback)},
      {"bytes", bytes},
      {"aligned_pct", reqs ? 100.0 * Ld(f.write_aligned) / reqs : 0.0},
      {"mean_size", reqs ? static_cast<double>(bytes) / reqs : 0.0}};
  j["reads"] = {{"requests", Ld(f.read_requests)},
                {"bytes", Ld(f.read_bytes)},
                {"cached_attrs", in.cached_attrs}};
  json errs = json::object();
  for (int e = 1; e < kErrnoSlots; ++e) {
    const uint64_t c = Ld(f.errors[e]);
    if (c == 0) continue;
    const char* name = strerrorname_np(e);
    errs[name ? name : std::to_string(e)] = c;
  }
  j["errors"] = errs;
  j["inodes"] = {{"negative_lookups", Ld(f.negative_lookups)},
                 {"purged", Ld(f.inodes_purged)},
                 {"orphans_purged_at_mount", Ld(f.orphans_purged_at_mount)},
                 {"purge_errors", Ld(f.purge_errors)},
                 {"dir_attrs_from_changes", Ld(f.dir_attrs_from_changes)},
                 {"unlink_times_folded", Ld(f.unlink_times_folded)},
                 {"entry_times_folded", Ld(f.entry_times_folded)},
                 {"create_fallbacks", Ld(f.create_fallbacks)},
                 {"stored_bytes_kept", Ld(f.stored_bytes_kept)},
                 {"growth_shown", Ld(f.growth_shown)},
                 {"growth_not_shown", Ld(f.growth_not_shown)}};
}

// "coalescing": the write buffers' settings and counters.
json CoalescingJson(const StatsInputs& in) {
  json co;
  co["enabled"] = in.coalesce;
  co["idle_flush_ms"] = in.idle_flush_ms;
  co["frontier_hold_ms"] = in.frontier_hold_ms;
  co["memory_cap"] = in.memory_cap;
  co["send_window"] = in.send_window;
  co["file_send_window"] = in.file_send_window;
  co["buffered_bytes"] = in.buffered_bytes;
  co["live_writers"] = in.live_writers;
  if (in.coalesce_counters) {
    const CoalesceCounters& c = *in.coalesce_counters;
    co["full_from_buffer"] = Ld(c.full_from_buffer);
    co["full_direct"] = Ld(c.full_direct);
    co["keep_refused"] = Ld(c.keep_refused);
    co["write_through"] = Ld(c.write_through);
    json pf = json::object();
    for (int r = 0; r < static_cast<int>(FlushReason::kCount); ++r) {
      pf[FlushReasonName(static_cast<FlushReason>(r))] =
          Ld(c.partial_flushes[r]);
    }
    co["partial_flushes"] = pf;
    co["partial_bytes"] = Ld(c.partial_bytes);
    co["deferred_errors"] = Ld(c.deferred_errors);
    co["reported_errors"] = Ld(c.reported_errors);
    co["file_window_waits"] = Ld(c.file_window_waits);
    co["capped_commits"] = Ld(c.capped_commits);
    co["size_raises"] = Ld(c.size_raises);
    co["read_size_fetches"] = Ld(c.read_size_fetches);
  }
  return co;
}

// "backend": the stripe client's counters.
json BackendJson(const StatsInputs& in) {
  const auto& b = in.client;
  const uint64_t stripe_writes = b.full_stripe_writes + b.new_partial_stripes +
                                 b.rmw_stripes + b.parity_delta_updates;
  return {{"stripe_writes", stripe_writes},
          {"full_stripe_writes", b.full_stripe_writes},
          {"full_stripe_pct",
           stripe_writes ? 100.0 * b.full_stripe_writes / stripe_writes : 0.0},
          {"new_partial_stripes", b.new_partial_stripes},
          {"rmw_stripes", b.rmw_stripes},
          {"rmw_bytes_read", b.rmw_bytes_read},
          {"parity_delta_updates", b.parity_delta_updates},
          {"degraded_writes", b.degraded_writes},
          {"degraded_queued", b.degraded_queued},
          {"degraded_repaired", b.degraded_repaired},
          {"degraded_queue_overflow", b.degraded_queue_overflow},
          {"still_degraded", b.still_degraded},
          {"degraded_refused", b.degraded_refused},
          {"failed_writes", b.failed_writes},
          {"commit_conflicts", b.commit_conflicts},
          {"degraded_reads", b.degraded_reads},
          {"chunk_read_errors", b.chunk_read_errors},
          {"crc_errors", b.crc_errors},
          {"chunk_write_errors", b.chunk_write_errors},
          {"bytes_written", b.bytes_written},
          {"bytes_read", b.bytes_read},
          {"gc_chunk_deletes", b.gc_chunk_deletes},
          {"gc_errors", b.gc_errors},
          {"slow_chunk_reads", b.slow_chunk_reads},
          {"abandoned_chunk_reads", b.abandoned_chunk_reads},
          {"map_updates", b.map_updates},
          {"hedged_chunk_reads", b.hedged_chunk_reads},
          {"stripe_map_hits", b.stripe_map_hits},
          {"stripe_map_misses", b.stripe_map_misses},
          {"read_ahead_loads", b.read_ahead_loads},
          {"degraded_stripe_loads", b.degraded_stripe_loads},
          {"stripe_cache_hits", b.stripe_cache_hits},
          {"stripe_cache_bytes", b.stripe_cache_bytes}};
}

}  // namespace

nlohmann::json StatsJson(const StatsInputs& in) {
  json j;
  j["volume"] = {{"description", in.volume},
                 {"k", in.k},
                 {"m", in.m},
                 {"cell_size", in.cell_size},
                 {"stripe_size", in.stripe_size}};
  j["mountpoint"] = in.mountpoint;
  j["pid"] = in.pid;
  if (in.has_engine) AddEngine(in, j);
  if (in.fs) AddFsCounters(in, j);
  j["coalescing"] = CoalescingJson(in);
  if (in.has_meta_hold) {
    j["meta_hold"] = {{"held_calls", in.meta_held_calls},
                      {"expired_calls", in.meta_expired_calls},
                      {"failovers", in.meta_failovers}};
  }
  j["backend"] = BackendJson(in);
  return j;
}

}  // namespace stripefs::fs

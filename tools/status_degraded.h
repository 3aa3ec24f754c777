// Why a stripe is degraded, as `stripefs status` sees it, and the advice
// for each cause (tools/cmd_status.cc; docs/cluster.md, `stripefs status`).
//
// A stripe is degraded when a chunk is marked missing in the stripe map
// (missing_mask) or sits on a server that is not up and answering. Status
// cannot see which mount noted which stripe in its DegradedQueue (that is
// in the mount's memory), so it judges by the servers now:
//   kUnavailable  some chunk is on a server that is down, out or silent:
//                 `stripefs repair` once it is back or marked out.
//   kNoSpace      every missing chunk is on a server that is up but inside
//                 its reserve (free <= reserved + one cell): the stripe was
//                 committed degraded because that store refused the write
//                 for space; the mount that wrote it rewrites it itself once
//                 the store has room (docs/backend.md, "Degraded commits near
//                 full"), so the fix is space, not `stripefs repair`.
//   kRebuild      missing chunks on servers that are up with room: a mount
//                 heals those it committed for space within its backoff
//                 (at most 30 s) once room is back; the rest (a server back
//                 from down, a mount gone since) need `stripefs repair`.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stripefs::tools {

enum class DegradedCause { kNone, kUnavailable, kNoSpace, kRebuild };

struct StatusServer {
  bool usable = false;  // up in the map and answering
  bool full = false;    // free space within its reserve (+ one cell)
};

// `ids[i]` is the server of chunk i (placement); `missing` the stripe's
// missing_mask. An unknown server id counts as unusable.
inline DegradedCause ClassifyDegraded(
    uint32_t missing, const std::vector<uint32_t>& ids,
    const std::map<uint32_t, StatusServer>& servers) {
  bool any = false, all_full = true;
  for (uint32_t i = 0; i < ids.size() && i < 32; ++i) {
    auto it = servers.find(ids[i]);
    const bool chunk_missing = missing & (1u << i);
    if (it == servers.end() || !it->second.usable)
      return DegradedCause::kUnavailable;
    if (!chunk_missing) continue;
    any = true;
    all_full &= it->second.full;
  }
  if (!any) return DegradedCause::kNone;
  return all_full ? DegradedCause::kNoSpace : DegradedCause::kRebuild;
}

struct DegradedCounts {
  uint64_t unavailable = 0, no_space = 0, rebuild = 0;
  uint64_t total() const { return unavailable + no_space + rebuild; }
  void Add(DegradedCause c) {
    unavailable += c == DegradedCause::kUnavailable;
    no_space += c == DegradedCause::kNoSpace;
    rebuild += c == DegradedCause::kRebuild;
  }
};

// The health check lines (HEALTH_WARN) for degraded stripes, one per cause
// present; `repair` is the command to suggest.
inline std::vector<std::string> DegradedAdvice(const DegradedCounts& c,
                                               const std::string& repair) {
  std::vector<std::string> out;
  if (c.unavailable)
    out.push_back(std::to_string(c.unavailable) +
                  " stripes degraded by servers down, out or not answering; "
                  "once they are back or marked out, run `" +
                  repair + "`");
  if (c.no_space)
    out.push_back(std::to_string(c.no_space) +
                  " stripes committed degraded for lack of space (their "
                  "missing chunks' servers are in their reserve); the mounts "
                  "that wrote them rewrite them once those servers have room: "
                  "free space or add servers (no repair needed)");
  if (c.rebuild)
    out.push_back(std::to_string(c.rebuild) +
                  " stripes miss chunks on servers that are up with room; "
                  "a mount rewrites those it committed degraded for space "
                  "within 30 s of room coming back, `" +
                  repair + "` rebuilds the rest");
  return out;
}

}  // namespace stripefs::tools

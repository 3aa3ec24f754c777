// The kBalanced placement scheme (placement.h): which placement group a
// stripe falls in, and the per-epoch table of servers for every group.
//
// Table: a replay of the cluster's growth, computed from the map alone.
//  1. Base (whatever the servers' states): servers of weight > 0 in id order
//     (ids are handed out increasing, so this is the order they joined).
//     The first k+m hold every group (row g, index i: server (g+i) mod
//     k+m). Each later server then takes round(G(k+m) x its weight / the
//     weight so far) entries, one at a time from the server holding the
//     most for its weight, picking an entry of that donor whose row stays
//     as evenly spread over failure domains (domains known so far) as
//     before. So every server holds its weighted share to within one entry,
//     and the table for N+1 servers differs from the one for N in exactly
//     the entries the new server took (~1/(N+1) of them).
//  2. Rows not evenly spread over the map's domains (left from when fewer
//     domains existed) move entries until they are: ring probes (below)
//     for a server under its cap of (1 + 1/kSlackDen) x its share.
//  3. Each entry on an `out` server re-probes the ring hash(g, i, attempt):
//     the first server not out, not in the row, keeping the spread; no cap,
//     so marking a server out moves only its own entries (and a second one
//     out leaves the first one's re-placed entries where they are).
//     The ring holds kRingPointsPerDefaultWeight points per default weight.
//
// Trade-off (docs/scale.md): minimal movement and exact balance when
// servers join in id order, marked out or back in; a server removed from
// the map, a weight changed, or a server added with an id below existing
// ones replays differently from that point on and moves up to all entries
// of later servers (the product has no removal; use `out`).
//
// Limits: groups <= kMaxPlacementGroups, chunks <= 32, servers <= 2^16 (map
// codec). Cost: O(G (k+m) log(N)) steals for the base, ~0.5 s at N = 10^3,
// G = 2^16 (docs/scale.md); memory ~3 x the table while building.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/meta/meta_types.h"
#include "common/status.h"

namespace stripefs {

inline constexpr uint32_t kRingPointsPerDefaultWeight = 64;
inline constexpr uint32_t kSlackDen = 50;  // step 2 cap: share x (1 + 1/50)
inline constexpr uint32_t kStrictProbes = 64;

// (start(inode) + stripe) mod groups, start(inode) = frac(inode x golden
// ratio) x groups: a file's stripes on consecutive groups, consecutive
// inodes' files far apart.
uint32_t BalancedGroup(uint64_t inode, uint64_t stripe, uint32_t groups);

// [group * chunks + index] -> server id. EINVAL when fewer than `chunks`
// servers are neither out nor of weight 0. `base` (may be null): the table
// of steps 1-2, which server states do not enter; when *base is set it is
// reused (the caller checks that servers, domains and weights are those it
// was built from), else it is set, so a state change costs step 3 only.
Result<std::vector<uint32_t>> BuildBalancedTable(
    const std::vector<ServerInfo>& servers, uint32_t chunks, uint32_t groups,
    std::shared_ptr<const std::vector<uint32_t>>* base = nullptr);

}  // namespace stripefs

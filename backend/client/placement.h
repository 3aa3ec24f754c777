// Placement: which chunk server holds each chunk of a stripe.
//
// A stripe (inode, stripe_no) maps to a placement group; a per-epoch table
// built by Create holds the server of every chunk index of every group, so
// a placement is a lookup. The map's PlacementScheme picks how:
//
// kLegacy (maps stored before schemes existed; existing volumes keep it):
//   group = hash(inode, stripe) mod 4096; for each chunk index i in
//   0..k+m-1 a server, in two steps:
//    1. base: index i takes the server with the highest rendezvous score
//       hash(group, i, server) among ALL servers of the map not yet chosen,
//       preferring failure domains not yet used. Server states do not enter.
//    2. an index whose base server is `out` takes the best-scoring server
//       that is not out and not used by any other index.
//   Poorly balanced at scale (docs/scale.md); kept bit-for-bit so old
//   volumes find their chunks. LegacyScan recomputes one group this way.
//
// kBalanced (new volumes): group = (start(inode) + stripe_no) mod G, with
//   start a Weyl sequence of the inode (consecutive inodes start far apart)
//   and G = map.placement_groups: a file's consecutive stripes sit on
//   consecutive groups. The table comes from balanced_table.h: a replay of
//   the cluster's growth in server-id order (each server takes its weighted
//   share, one entry from each of the fullest servers), over all servers
//   whatever their state, then out servers' entries re-placed.
//
// Both schemes: marking a server out moves exactly the chunks that were on
// it; down servers keep their placements; adding servers changes base
// choices (a rebalance). Deterministic: every client with the same cluster
// map computes the same table.
//
// Memory: G x (k+m) x 4 bytes (6 MiB at G = 2^18, k+m = 6). Create costs
// O(G x (k+m) x log servers) (kBalanced) or O(4096 x (k+m) x servers)
// (kLegacy). Thread-safety: immutable after construction; share freely.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/meta/meta_types.h"
#include "common/status.h"

namespace stripefs {

class Placement {
 public:
  static constexpr uint32_t kLegacyPgCount = 4096;

  // EINVAL when fewer than `chunks` (k+m) servers are not out (kBalanced:
  // not out and of weight > 0), or the map's groups are out of range.
  // `previous` (may be null): the placement of an earlier map; a kBalanced
  // one with the same servers, domains, weights, groups and k+m lends its
  // state-independent base, so a state change (down, out, in) skips the
  // replay (balanced_table.h).
  static Result<Placement> Create(const ClusterMap& map, uint32_t chunks,
                                  const Placement* previous = nullptr);

  uint32_t PlacementGroup(uint64_t inode, uint64_t stripe) const;
  // Server ids for chunk indices 0..chunks-1 of the stripe (a table row).
  std::vector<uint32_t> ServersFor(uint64_t inode, uint64_t stripe) const;
  std::vector<uint32_t> ServersForGroup(uint32_t pg) const;
  std::span<const uint32_t> Row(uint32_t pg) const {
    return {table_.data() + size_t{pg} * chunks_, chunks_};
  }
  // kLegacy only: group `pg` computed by the scan the table was filled from.
  std::vector<uint32_t> LegacyScan(uint32_t pg) const;

  uint64_t epoch() const { return epoch_; }
  uint32_t chunks() const { return chunks_; }
  uint32_t group_count() const { return pg_count_; }
  PlacementScheme scheme() const { return scheme_; }

 private:
  struct Candidate {
    uint32_t id;
    uint32_t domain;  // dense failure-domain number
    bool out;
  };
  Placement() = default;

  PlacementScheme scheme_ = PlacementScheme::kLegacy;
  uint64_t epoch_ = 0;
  uint32_t chunks_ = 0;
  uint32_t pg_count_ = 0;
  std::vector<Candidate> candidates_;  // kLegacy: for LegacyScan
  uint32_t domains_ = 0;
  std::vector<uint32_t> table_;  // [pg * chunks_ + index] -> server id
  // kBalanced: the table before out servers are re-placed, and the servers
  // (states cleared) it was built from.
  std::shared_ptr<const std::vector<uint32_t>> base_;
  std::vector<ServerInfo> base_servers_;
};

// 64-bit mixing hash (splitmix64 finalizer) used for placement; stable
// across versions, since placement depends on it.
uint64_t PlacementHash(uint64_t a, uint64_t b);

}  // namespace stripefs

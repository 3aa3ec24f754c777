// Placement: which chunk server holds each chunk of a stripe.
//
// stripe (inode, stripe_no) -> placement group (hash mod pg_count) -> for
// each chunk index i in 0..k+m-1 a server, in two steps:
//  1. base: index i takes the server with the highest rendezvous
//     (highest-random-weight) score hash(pg, i, server) among ALL servers of
//     the map not yet chosen, preferring failure domains not yet used. Server
//     states do not enter this step.
//  2. an index whose base server is `out` takes the best-scoring server that
//     is not out and not used by any other index (again preferring unused
//     domains).
// So marking a server out moves exactly the chunks that were on it, and
// nothing else: reads of the other chunks keep working while repair rebuilds
// the moved ones. Adding servers changes base choices (a rebalance: reads
// find moved chunks missing and reconstruct until `stripefs repair` runs).
// Down servers keep their placements (their chunks are missing until they
// return or are marked out and repaired). Deterministic: every client with
// the same cluster map computes the same answer.
//
// Thread-safety: immutable after construction; share freely.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/meta/meta_types.h"
#include "common/status.h"

namespace stripefs {

class Placement {
 public:
  static constexpr uint32_t kDefaultPgCount = 4096;

  // EINVAL when fewer than `chunks` (k+m) servers are not out.
  static Result<Placement> Create(const ClusterMap& map, uint32_t chunks,
                                  uint32_t pg_count = kDefaultPgCount);

  uint32_t PlacementGroup(uint64_t inode, uint64_t stripe) const;
  // Server ids for chunk indices 0..chunks-1 of the stripe.
  std::vector<uint32_t> ServersFor(uint64_t inode, uint64_t stripe) const;
  std::vector<uint32_t> ServersForGroup(uint32_t pg) const;

  uint64_t epoch() const { return epoch_; }
  uint32_t chunks() const { return chunks_; }

 private:
  struct Candidate {
    uint32_t id;
    uint32_t domain;  // dense failure-domain number
    bool out;
  };
  Placement(uint64_t epoch, uint32_t chunks, uint32_t pg_count,
            std::vector<Candidate> candidates, uint32_t domains)
      : epoch_(epoch),
        chunks_(chunks),
        pg_count_(pg_count),
        candidates_(std::move(candidates)),
        domains_(domains) {}

  uint64_t epoch_;
  uint32_t chunks_;
  uint32_t pg_count_;
  std::vector<Candidate> candidates_;
  uint32_t domains_;
};

// 64-bit mixing hash (splitmix64 finalizer) used for placement; stable
// across versions, since placement depends on it.
uint64_t PlacementHash(uint64_t a, uint64_t b);

}  // namespace stripefs

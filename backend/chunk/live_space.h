// Live-space arithmetic of the chunk store: segment byte ranges per
// segment, merged and subtracted, so that the bytes a set of chunk versions
// references together (a piece shared by versions counts once) and the
// bytes no remaining version references (holes to punch) can be worked out
// (see "Space" in chunk_store.h). Pure functions; ChunkStore::ApplyLive and
// PunchHoles (live_space.cc) apply their results to SegmentSet and the
// segment files, the compactor uses HasPieceIn to pick what to move.
//
// Limits: ranges are half-open [begin, end) segment offsets; a piece covers
// SegmentExtentBytes(length) (its length rounded up to the segment
// alignment). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_index_codec.h"

namespace stripefs::live_space {

// Segment byte ranges [begin, end), per segment.
using RangeSet = std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>>;

// `only`: the segments to take pieces from (null: all).
void AddRanges(const ChunkIndexValue& v, RangeSet* r,
               const std::vector<uint64_t>* only = nullptr);

// Sorts and merges the ranges of each segment.
void Normalize(RangeSet* r);

// The ranges of segment `seq` in `r`, or null.
const std::vector<std::pair<uint64_t, uint64_t>>* Find(const RangeSet& r,
                                                       uint64_t seq);

// The bytes `ranges` hold (disjoint ranges).
uint64_t Sum(const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

// The ranges of `a` (normalized) that `b` (normalized) does not cover.
std::vector<std::pair<uint64_t, uint64_t>> Subtract(
    const std::vector<std::pair<uint64_t, uint64_t>>& a,
    const std::vector<std::pair<uint64_t, uint64_t>>* b);

// Whether `v` has a piece in segment `seq`.
bool HasPieceIn(const ChunkIndexValue& v, uint64_t seq);

// The segment bytes `values` reference together (overlaps once), and per
// segment (bytes, end of the last range) added to *per_segment.
uint64_t UniqueSegmentBytes(
    const std::vector<const ChunkIndexValue*>& values,
    std::map<uint64_t, std::pair<uint64_t, uint64_t>>* per_segment);

// What one commit of a chunk id changes in its segments.
struct LiveChange {
  struct Segment {
    uint64_t seq = 0;
    uint64_t bytes = 0;    // live bytes added (removed)
    uint64_t entries = 0;  // live index entries added (removed)
  };
  std::vector<Segment> added;    // apply first, so no segment looks unused
  std::vector<Segment> removed;  // then these
  // Per segment, the ranges no remaining version references any more
  // (normalized; empty segments left out): the holes to punch.
  RangeSet dead;
};
// The change of a commit that keeps the id's versions `others` as they
// are, lets go of `freed` (replaced or deleted) and puts `put` (null for a
// delete) under `put_entries` index keys. A piece shared by several
// versions counts once; bytes `others` still reference never go dead.
LiveChange ChangeOf(const std::vector<ChunkIndexValue>& others,
                    const std::vector<const ChunkIndexValue*>& freed,
                    const ChunkIndexValue* put, uint64_t put_entries);

}  // namespace stripefs::live_space

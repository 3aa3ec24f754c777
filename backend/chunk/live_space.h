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

}  // namespace stripefs::live_space

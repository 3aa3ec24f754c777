// Live-space accounting and hole punching (see live_space.h).
#include "backend/chunk/live_space.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"
#include "backend/chunk/chunk_version_cache.h"
#include "backend/chunk/group_commit.h"
#include "backend/chunk/uring_file_io.h"
#include "common/rocks_glue.h"

namespace stripefs {

namespace live_space {

void AddRanges(const ChunkIndexValue& v, RangeSet* r,
               const std::vector<uint64_t>* only) {
  if (!v.in_segment) return;
  for (const ChunkPiece& p : v.pieces) {
    if (only != nullptr &&
        std::find(only->begin(), only->end(), p.segment) == only->end()) {
      continue;
    }
    (*r)[p.segment].emplace_back(
        p.segment_offset, p.segment_offset + SegmentExtentBytes(p.length));
  }
}

void Normalize(RangeSet* r) {
  for (auto& [seq, ranges] : *r) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& x : ranges) {
      if (!merged.empty() && x.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, x.second);
      } else {
        merged.push_back(x);
      }
    }
    ranges = std::move(merged);
  }
}

const std::vector<std::pair<uint64_t, uint64_t>>* Find(const RangeSet& r,
                                                       uint64_t seq) {
  auto it = r.find(seq);
  return it == r.end() ? nullptr : &it->second;
}

uint64_t Sum(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  uint64_t n = 0;
  for (const auto& [b, e] : ranges) n += e - b;
  return n;
}

std::vector<std::pair<uint64_t, uint64_t>> Subtract(
    const std::vector<std::pair<uint64_t, uint64_t>>& a,
    const std::vector<std::pair<uint64_t, uint64_t>>* b) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  size_t j = 0;
  for (auto [lo, hi] : a) {
    while (b != nullptr && j < b->size() && (*b)[j].second <= lo) ++j;
    size_t k = j;
    while (b != nullptr && k < b->size() && (*b)[k].first < hi) {
      if ((*b)[k].first > lo) out.emplace_back(lo, (*b)[k].first);
      lo = std::max(lo, (*b)[k].second);
      ++k;
    }
    if (lo < hi) out.emplace_back(lo, hi);
  }
  return out;
}

bool HasPieceIn(const ChunkIndexValue& v, uint64_t seq) {
  if (!v.in_segment) return false;
  for (const ChunkPiece& p : v.pieces) {
    if (p.segment == seq) return true;
  }
  return false;
}

uint64_t UniqueSegmentBytes(
    const std::vector<const ChunkIndexValue*>& values,
    std::map<uint64_t, std::pair<uint64_t, uint64_t>>* per_segment) {
  RangeSet r;
  for (const ChunkIndexValue* v : values) AddRanges(*v, &r);
  Normalize(&r);
  uint64_t total = 0;
  for (const auto& [seq, ranges] : r) {
    const uint64_t n = Sum(ranges);
    total += n;
    auto& [bytes, end] = (*per_segment)[seq];
    bytes += n;
    if (!ranges.empty()) end = std::max(end, ranges.back().second);
  }
  return total;
}

LiveChange ChangeOf(const std::vector<ChunkIndexValue>& others,
                    const std::vector<const ChunkIndexValue*>& freed,
                    const ChunkIndexValue* put, uint64_t put_entries) {
  // Only segments the op adds or lets go of a piece in can change, and the
  // other versions' pieces there (`base`) count the same before and after:
  // |base + freed| - |base + put| = |freed - base| - |put - base|. So only
  // the op's own pieces are compared, against `base` sorted once.
  std::vector<uint64_t> touched;
  auto touch = [&](const ChunkIndexValue& v) {
    if (!v.in_segment) return;
    for (const ChunkPiece& p : v.pieces) touched.push_back(p.segment);
  };
  for (const ChunkIndexValue* f : freed) touch(*f);
  if (put != nullptr) touch(*put);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  RangeSet base, freed_ranges, put_ranges;
  for (const ChunkIndexValue& v : others) AddRanges(v, &base, &touched);
  std::map<uint64_t, uint64_t> added, removed;  // entries per segment
  for (const ChunkIndexValue* f : freed) {
    AddRanges(*f, &freed_ranges);
    if (!f->in_segment) continue;
    for (const ChunkPiece& p : f->pieces) removed[p.segment] = 0;
  }
  for (auto& [seq, n] : removed) {
    for (const ChunkIndexValue* f : freed) n += HasPieceIn(*f, seq) ? 1 : 0;
  }
  if (put != nullptr) {
    AddRanges(*put, &put_ranges);
    if (put->in_segment) {
      for (const ChunkPiece& p : put->pieces) added[p.segment] = put_entries;
    }
  }
  Normalize(&base);
  Normalize(&freed_ranges);
  Normalize(&put_ranges);
  // Per segment: the bytes only the freed versions referenced, and the
  // bytes only the put references.
  RangeSet freed_only, put_only;
  for (const auto& [seq, r] : freed_ranges)
    freed_only[seq] = Subtract(r, Find(base, seq));
  for (const auto& [seq, r] : put_ranges)
    put_only[seq] = Subtract(r, Find(base, seq));
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> bytes;  // freed, put
  for (const auto& [seq, r] : freed_only) bytes[seq].first = Sum(r);
  for (const auto& [seq, r] : put_only) bytes[seq].second = Sum(r);
  LiveChange change;
  for (const auto& [seq, fp] : bytes) {
    const auto [b, a] = fp;
    const uint64_t entries = added.count(seq) ? added[seq] : 0;
    if (a > b || entries > 0) {
      change.added.push_back({seq, a > b ? a - b : 0, entries});
    }
  }
  for (const auto& [seq, fp] : bytes) {
    const auto [b, a] = fp;
    const uint64_t entries = removed.count(seq) ? removed[seq] : 0;
    if (b > a || entries > 0) {
      change.removed.push_back({seq, b > a ? b - a : 0, entries});
    }
  }
  // What only the freed versions referenced, less what the put references.
  for (const auto& [seq, ranges] : freed_only) {
    auto dead = Subtract(ranges, Find(put_ranges, seq));
    if (!dead.empty()) change.dead[seq] = std::move(dead);
  }
  return change;
}

}  // namespace live_space

void ChunkStore::ApplyLive(CommitOp& op) {
  // A put that lets nothing go (a new version: write, clone, patch) adds
  // only its new extent, which nothing else references; its other pieces
  // are shared with versions that stay (the source). So the other
  // versions' pieces need not be gathered (they grow with every patch).
  if (op.kind == CommitOp::Kind::kPut && op.freed.empty() && !op.relocation) {
    if (!op.value.in_segment) return;
    std::map<uint64_t, bool> segs;
    for (const ChunkPiece& p : op.value.pieces) segs[p.segment] = true;
    for (const auto& [seq, unused] : segs) {
      const bool fresh = op.extent.bytes > 0 && seq == op.extent.segment;
      segments_->AddLive(seq, fresh ? op.extent.bytes : 0, op.keys.size());
    }
    return;
  }
  std::vector<const ChunkIndexValue*> freed;
  for (const Freed& f : op.freed) freed.push_back(&f.value);
  const live_space::LiveChange change = live_space::ChangeOf(
      op.others, freed, op.kind == CommitOp::Kind::kPut ? &op.value : nullptr,
      op.keys.size());
  // Additions first, so no segment is seen unused in between.
  for (const auto& s : change.added) {
    segments_->AddLive(s.seq, s.bytes, s.entries);
  }
  for (const auto& s : change.removed) {
    segments_->RemoveLive(s.seq, s.bytes, s.entries);
  }
  for (const Freed& f : op.freed) {
    // A legacy file replaced by a rewrite (deletes unlinked theirs).
    if (!f.value.in_segment && op.kind == CommitOp::Kind::kPut) {
      ::unlink(
          chunk_paths::LegacyChunkPath(data_dir_, op.id, f.version).c_str());
    }
  }
  // Punch what no remaining version references (a compaction move leaves
  // its old bytes to the segment's removal). Without hole punching the
  // compactor gets the space back.
  if (!options_.punch_holes || op.relocation) return;
  for (const auto& [seq, dead] : change.dead) {
    std::shared_ptr<SegmentFile> seg = segments_->Get(seq);
    if (!seg) continue;
    for (const auto& [lo, hi] : dead) {
      if (hi - lo >= options_.punch_min_bytes) {
        op.holes.push_back({seg, seq, lo, hi});
      }
    }
  }
}

void ChunkStore::PunchHoles(std::vector<Hole>* holes) {
  for (const Hole& h : *holes) {
    if (::fallocate(h.segment->write_fd.get(),
                    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(h.lo),
                    static_cast<off_t>(h.hi - h.lo)) == 0) {
      counters_.holes_punched.fetch_add(1, std::memory_order_relaxed);
      segments_->NotePunched(h.seq, h.hi - h.lo);
    }
  }
  holes->clear();
}

}  // namespace stripefs

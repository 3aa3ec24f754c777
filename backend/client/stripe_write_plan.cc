#include "backend/client/stripe_write_plan.h"

#include <algorithm>
#include <string>

namespace stripefs {

namespace {

std::string StripeName(uint64_t ino, uint64_t stripe) {
  return "stripe " + std::to_string(stripe) + " of inode " +
         std::to_string(ino);
}

}  // namespace

Status ValidateWriteRequest(const StripeGeometry& geo,
                            const StripeWriteRequest& req) {
  const uint64_t S = geo.stripe_size();
  const uint64_t buf_end = uint64_t{req.origin} + req.bytes.size();
  uint64_t prev_end = 0;
  for (const StripeRange& r : req.ranges) {
    if (r.begin >= r.end || r.end > S || r.begin < prev_end ||
        r.begin < req.origin || r.end > buf_end) {
      return Status::InvalidArgument(
          "bad write range [" + std::to_string(r.begin) + ", " +
          std::to_string(r.end) + ") of " + StripeName(req.ino, req.stripe) +
          ": ranges must be sorted, disjoint, non-empty and inside the " +
          std::to_string(S) + "-byte stripe and the buffer");
    }
    prev_end = r.end;
  }
  if (req.ranges.empty() && req.zero_from == kNoTruncate) {
    return Status::InvalidArgument(
        "write of " + StripeName(req.ino, req.stripe) + " has no byte ranges");
  }
  return Status::Ok();
}

std::vector<ColumnWindow> MergeColumnWindows(std::vector<ColumnWindow> windows,
                                             uint32_t gap, size_t max_windows) {
  std::sort(windows.begin(), windows.end(),
            [](const ColumnWindow& a, const ColumnWindow& b) {
              return a.lo < b.lo || (a.lo == b.lo && a.hi < b.hi);
            });
  std::vector<ColumnWindow> out;
  for (const ColumnWindow& w : windows) {
    if (w.lo >= w.hi) continue;
    if (!out.empty() && uint64_t{w.lo} < uint64_t{out.back().hi} + gap) {
      out.back().hi = std::max(out.back().hi, w.hi);
    } else {
      out.push_back(w);
    }
  }
  // Too many: merge the two neighbours with the smallest gap, repeatedly
  // (each round removes one window, so this ends).
  while (out.size() > std::max<size_t>(max_windows, 1)) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < out.size(); ++i)
      if (out[i + 1].lo - out[i].hi < out[best + 1].lo - out[best].hi) best = i;
    out[best].hi = out[best + 1].hi;
    out.erase(out.begin() + static_cast<ptrdiff_t>(best) + 1);
  }
  return out;
}

WritePlan PlanStripeWrite(const StripeGeometry& geo, bool parity_delta,
                          const StripeVersion* base,
                          const StripeWriteRequest& req) {
  const uint32_t k = geo.k(), m = geo.m(), c = geo.cell_size();
  const bool truncating = req.zero_from != kNoTruncate;
  WritePlan plan;
  plan.zero_from = req.zero_from;
  const uint64_t end = req.ranges.empty() ? 0 : req.ranges.back().end;
  // Chunk length of the new version: enough for the old bytes and the new.
  uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(c, end));
  if (base != nullptr) len = std::max(len, base->chunk_len);
  if (truncating) {
    len = static_cast<uint32_t>(std::min<uint64_t>(c, req.zero_from));
    len = std::max(len, static_cast<uint32_t>(std::min<uint64_t>(c, end)));
  }
  if (len == 0) len = 1;  // a stripe truncated to nothing keeps one byte
  plan.chunk_len = len;

  // Touched cells, each cell's own column window, and the parity windows
  // (the union of every touched column interval: parity column x changes
  // where any cell's column x does).
  plan.cell_windows.assign(k, {});
  std::vector<ColumnWindow> touched_columns;
  for (const StripeRange& r : req.ranges) {
    geo.ForEachCell(r.begin, r.end, c, [&](const CellSpan& span) {
      plan.touched |= ChunkBit(span.cell);
      const uint32_t lo = std::min(span.lo, len), hi = std::min(span.hi, len);
      if (lo >= hi) return;
      plan.cell_windows[span.cell].push_back({lo, hi});
      touched_columns.push_back({lo, hi});
    });
  }
  for (std::vector<ColumnWindow>& cw : plan.cell_windows)
    cw = MergeColumnWindows(std::move(cw), kParityWindowGap, kMaxParityWindows);
  plan.parity_windows = MergeColumnWindows(std::move(touched_columns),
                                           kParityWindowGap, kMaxParityWindows);
  // What a delta reads (and sends back): each touched cell's window and m
  // times the parity windows.
  uint64_t delta_bytes = 0;
  for (const ColumnWindow& w : plan.parity_windows)
    delta_bytes += uint64_t{m} * (w.hi - w.lo);
  for (const std::vector<ColumnWindow>& cw : plan.cell_windows)
    for (const ColumnWindow& w : cw) delta_bytes += w.hi - w.lo;

  const bool whole = !truncating && req.ranges.size() == 1 &&
                     req.ranges[0].begin == 0 &&
                     req.ranges[0].end == geo.stripe_size();
  // A delta reads those windows; RMW reads k whole chunks and writes
  // k + m (a delta rewrites only the touched and parity chunks, on the
  // servers, and clones the rest).
  const bool delta_ok = parity_delta && base != nullptr && !truncating &&
                        plan.touched != 0 && !plan.parity_windows.empty() &&
                        base->missing_mask == 0 && len == base->chunk_len &&
                        delta_bytes < uint64_t{k} * len;
  if (whole) {
    plan.kind = WriteKind::kFull;
  } else if (base == nullptr) {
    plan.kind = WriteKind::kNewPartial;
  } else if (delta_ok) {
    plan.kind = WriteKind::kDelta;
  } else {
    plan.kind = WriteKind::kRmw;
  }
  return plan;
}

}  // namespace stripefs

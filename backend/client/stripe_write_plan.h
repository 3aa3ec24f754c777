// The pure half of the stripe write path: what one stripe's write asks for
// (StripeWriteRequest, checked by ValidateWriteRequest) and how it will be
// written (PlanStripeWrite's WritePlan: full encode, new partial stripe,
// read-modify-write or parity delta with its column windows). The executor
// that carries a plan out is StripeWriteExecutor (stripe_write.h).
//
// Pure values and functions: no I/O, thread-safe. Limits: a plan's parity
// windows are at most kMaxParityWindows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/client/stripe_geometry.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"

namespace stripefs {

inline constexpr uint64_t kNoTruncate = UINT64_MAX;

// One stripe's new bytes: the valid ranges of a buffer.
struct StripeWriteRequest {
  uint64_t ino = 0;
  uint64_t stripe = 0;
  // bytes[0] is stripe byte `origin`; every range lies inside the buffer.
  std::span<const uint8_t> bytes;
  uint32_t origin = 0;
  // Sorted, disjoint, non-empty, within the stripe. Empty only to truncate.
  std::vector<StripeRange> ranges;
  // Passed to the commit: the file grows to at least this size.
  uint64_t min_file_size = 0;
  // Truncate: bytes [zero_from, S) of the stripe become zeros and the chunk
  // length shrinks to fit (kNoTruncate: not a truncate).
  uint64_t zero_from = kNoTruncate;

  const uint8_t* At(uint64_t stripe_offset) const {
    return bytes.data() + (stripe_offset - origin);
  }
};

// EINVAL (naming the bad range) unless `req`'s ranges obey the rules above.
Status ValidateWriteRequest(const StripeGeometry& geo,
                            const StripeWriteRequest& req);

enum class WriteKind { kFull, kNewPartial, kRmw, kDelta };

// Columns [lo, hi) of a chunk (empty: lo == hi).
struct ColumnWindow {
  uint32_t lo = 0;
  uint32_t hi = 0;
};

// Parity windows of a delta: touched column intervals closer than this
// are merged into one window. Below a 4 KiB page the bytes saved do not pay
// for a separate range: the chunk store rounds every range out to its
// 4 KiB CRC blocks (reading and verifying the partly covered ones), and
// each window is another read and another patch range on the wire.
inline constexpr uint32_t kParityWindowGap = 4096;
// At most this many parity windows per delta (the closest ones are merged
// beyond it): bounds the reads and the pieces of a patched chunk.
inline constexpr size_t kMaxParityWindows = 16;

struct WritePlan {
  WriteKind kind = WriteKind::kFull;
  uint32_t chunk_len = 0;  // bytes in each chunk of the new version
  uint32_t touched = 0;    // mask of data cells receiving new bytes
  // kDelta: per data cell (k entries), the column windows it reads and
  // patches: its own touched columns merged like the parity windows
  // (sorted, disjoint; empty when untouched).
  std::vector<std::vector<ColumnWindow>> cell_windows;
  // kDelta: the parity windows read and patched, sorted, disjoint and
  // non-empty: the union of the touched columns of all cells (parity
  // column x changes exactly where some cell's column x does), intervals
  // less than kParityWindowGap apart merged, at most kMaxParityWindows.
  std::vector<ColumnWindow> parity_windows;
  uint64_t zero_from = kNoTruncate;
};

// The union of `windows` (any order, may overlap; empty ones ignored) as
// sorted, disjoint windows, where two less than `gap` columns apart become
// one, then neighbours with the smallest gaps merged until at most
// `max_windows` (at least 1) remain. Pure.
std::vector<ColumnWindow> MergeColumnWindows(std::vector<ColumnWindow> windows,
                                             uint32_t gap, size_t max_windows);

// Decides how to write `req` over `base` (null: no committed version).
// Pure: reads nothing, writes nothing.
WritePlan PlanStripeWrite(const StripeGeometry& geo, bool parity_delta,
                          const StripeVersion* base,
                          const StripeWriteRequest& req);

}  // namespace stripefs

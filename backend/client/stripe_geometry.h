// StripeGeometry: the byte arithmetic of a volume's stripes, in one place.
//
// A file is cut into stripes of S = k * c bytes; byte `o` of a stripe lies in
// data cell (chunk index) o / c at column o % c of that chunk. Everything
// that maps file or stripe offsets to cells and columns (reads, writes,
// parity deltas) goes through here.
//
// Pure value type; thread-safe. Ranges are half-open [begin, end).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/meta/meta_types.h"

namespace stripefs {

// A byte range inside one stripe, [begin, end) relative to the stripe start.
struct StripeRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  friend bool operator==(const StripeRange&, const StripeRange&) = default;
};

// The part of a stripe range that lies in one data cell: columns [lo, hi) of
// chunk `cell`.
struct CellSpan {
  uint32_t cell = 0;
  uint32_t lo = 0;
  uint32_t hi = 0;
};

// Bit of chunk index i in a chunk mask (missing, failed, touched ...).
inline uint32_t ChunkBit(uint32_t i) { return 1u << i; }

class StripeGeometry {
 public:
  explicit StripeGeometry(const Geometry& g)
      : k_(g.k), m_(g.m), cell_(g.cell_size) {}

  uint32_t k() const { return k_; }
  uint32_t m() const { return m_; }
  uint32_t width() const { return k_ + m_; }
  uint32_t cell_size() const { return cell_; }
  uint64_t stripe_size() const { return uint64_t{k_} * cell_; }

  // Offset of column `col` of data cell `cell` within the stripe.
  uint64_t StripeOffset(uint32_t cell, uint32_t col) const {
    return uint64_t{cell} * cell_ + col;
  }

  // Calls fn(CellSpan) for every data cell that stripe bytes [a, b) touch,
  // in cell order, with columns clipped to [0, column_limit).
  template <typename F>
  void ForEachCell(uint64_t a, uint64_t b, uint32_t column_limit,
                   F&& fn) const {
    if (a >= b) return;
    for (uint64_t cell = a / cell_; cell <= (b - 1) / cell_; ++cell) {
      const uint64_t base = cell * cell_;
      const uint64_t lo = std::max(a, base) - base;
      const uint64_t hi =
          std::min<uint64_t>({b - base, cell_, uint64_t{column_limit}});
      if (lo >= hi) continue;  // past the chunk's stored bytes
      fn(CellSpan{static_cast<uint32_t>(cell), static_cast<uint32_t>(lo),
                  static_cast<uint32_t>(hi)});
    }
  }

  // Calls fn(stripe, offset_in_stripe, pos, n) for the pieces of file bytes
  // [offset, offset + size): piece bytes [pos, pos + n) of the caller's
  // buffer land at `offset_in_stripe` of `stripe`.
  template <typename F>
  void ForEachStripe(uint64_t offset, uint64_t size, F&& fn) const {
    const uint64_t S = stripe_size();
    for (uint64_t pos = 0; pos < size;) {
      const uint64_t abs = offset + pos;
      const uint64_t n = std::min<uint64_t>(S - abs % S, size - pos);
      fn(abs / S, static_cast<uint32_t>(abs % S), pos, n);
      pos += n;
    }
  }

 private:
  uint32_t k_, m_, cell_;
};

}  // namespace stripefs

// Codec: Reed-Solomon k+m erasure coding over GF(2^8), built on ISA-L.
//
// The generator is ISA-L's Cauchy matrix (systematic: the first k rows are
// the identity), so any k of the k+m chunks determine the rest.
//
// Buffers: every chunk buffer passed to one call has the same length `len`
// (any length >= 1; no alignment requirement, though 64-byte aligned buffers
// are fastest). Buffers are borrowed for the duration of the call only;
// inputs and outputs must not overlap. Indices 0..k-1 are data chunks,
// k..k+m-1 parity chunks.
//
// Thread-safety: a Codec is immutable after Create() except for its decode
// table cache, which is internally synchronized; one Codec may be shared by
// any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "ec/decode_table_cache.h"

namespace stripefs::ec {

inline constexpr int kMaxChunks = 32;  // k + m limit

class Codec {
 public:
  // k >= 1, m >= 1, k + m <= 32; EINVAL otherwise. `cache_capacity` bounds
  // the number of cached decode tables (one per erasure pattern).
  static Result<std::unique_ptr<Codec>> Create(int k, int m,
                                               size_t cache_capacity = 256);

  int k() const { return k_; }
  int m() const { return m_; }

  // Computes the m parity chunks from the k data chunks.
  // data.size() == k, parity.size() == m.
  Status Encode(std::span<const uint8_t* const> data,
                std::span<uint8_t* const> parity, size_t len) const;

  // Rebuilds the chunks listed in `erased` from k surviving chunks.
  // chunks.size() == k+m. For i in `erased`, chunks[i] is an output buffer;
  // for i in `unavailable`, chunks[i] is ignored (may be null); every other
  // chunks[i] is a surviving chunk (only the first k survivors are read).
  // EINVAL if fewer than k chunks survive, `erased` is empty, or an index is
  // out of range or listed twice.
  Status Reconstruct(std::span<uint8_t* const> chunks,
                     std::span<const int> erased, size_t len,
                     std::span<const int> unavailable = {}) const;

  // Parity-delta update: data chunk `data_index` changed from `old_data` to
  // `new_data` over the same byte range [off, off+len) of the chunk;
  // `parity` (m pointers, at the same offset) is updated in place so that it
  // equals a full re-encode of the new data.
  Status UpdateParity(int data_index, const uint8_t* old_data,
                      const uint8_t* new_data, std::span<uint8_t* const> parity,
                      size_t len) const;
  // Same, given delta = old_data XOR new_data.
  Status UpdateParityWithDelta(int data_index, const uint8_t* delta,
                               std::span<uint8_t* const> parity,
                               size_t len) const;

  // The (k+m) x k generator matrix, row-major (for tests and tools).
  const std::vector<uint8_t>& encode_matrix() const { return encode_matrix_; }

  // Number of decode tables built (cache misses) so far.
  uint64_t decode_tables_built() const { return cache_.misses(); }

 private:
  Codec(int k, int m, size_t cache_capacity);
  // Builds the GF tables that compute `outputs` from source chunks `sources`
  // (k of them, ascending). Result has 32*k*outputs.size() bytes.
  Result<std::shared_ptr<const std::vector<uint8_t>>> BuildDecodeTables(
      std::span<const int> sources, std::span<const int> outputs) const;

  const int k_;
  const int m_;
  std::vector<uint8_t> encode_matrix_;  // (k+m) x k
  std::vector<uint8_t> encode_tables_;  // ec_init_tables of the parity rows
  mutable DecodeTableCache cache_;
};

}  // namespace stripefs::ec

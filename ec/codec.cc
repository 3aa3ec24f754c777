#include "ec/codec.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <string>

namespace stripefs::ec {
namespace {

// ISA-L takes lengths as int.
constexpr size_t kMaxLen = static_cast<size_t>(1) << 30;

Status CheckLen(size_t len) {
  if (len == 0 || len > kMaxLen) {
    return Status::InvalidArgument("chunk length " + std::to_string(len) +
                                   " out of range [1, 1 GiB]");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Codec>> Codec::Create(int k, int m,
                                             size_t cache_capacity) {
  if (k < 1 || m < 1 || k + m > kMaxChunks) {
    return Status::InvalidArgument(
        "invalid EC geometry k=" + std::to_string(k) +
        " m=" + std::to_string(m) + ": need k >= 1, m >= 1, k + m <= 32");
  }
  return std::unique_ptr<Codec>(new Codec(k, m, cache_capacity));
}

Codec::Codec(int k, int m, size_t cache_capacity)
    : k_(k),
      m_(m),
      encode_matrix_(static_cast<size_t>((k + m) * k)),
      encode_tables_(static_cast<size_t>(32 * k * m)),
      cache_(cache_capacity) {
  gf_gen_cauchy1_matrix(encode_matrix_.data(), k + m, k);
  ec_init_tables(k, m, encode_matrix_.data() + k * k, encode_tables_.data());
}

Status Codec::Encode(std::span<const uint8_t* const> data,
                     std::span<uint8_t* const> parity, size_t len) const {
  if (data.size() != static_cast<size_t>(k_) ||
      parity.size() != static_cast<size_t>(m_)) {
    return Status::InvalidArgument("Encode needs k data and m parity buffers");
  }
  STRIPEFS_RETURN_IF_ERROR(CheckLen(len));
  for (auto* p : data)
    if (p == nullptr) return Status::InvalidArgument("null data buffer");
  for (auto* p : parity)
    if (p == nullptr) return Status::InvalidArgument("null parity buffer");
  // ISA-L's signature is not const-correct; it only reads the sources.
  ec_encode_data(static_cast<int>(len), k_, m_,
                 const_cast<unsigned char*>(encode_tables_.data()),
                 const_cast<unsigned char**>(data.data()),
                 const_cast<unsigned char**>(parity.data()));
  return Status::Ok();
}

Result<std::shared_ptr<const std::vector<uint8_t>>> Codec::BuildDecodeTables(
    std::span<const int> sources, std::span<const int> outputs) const {
  const int k = k_;
  // Rows of the generator for the chosen sources form a k x k matrix B with
  // B * data = sources, so data = B^-1 * sources.
  std::vector<uint8_t> b(static_cast<size_t>(k * k));
  for (int r = 0; r < k; ++r) {
    std::copy_n(&encode_matrix_[static_cast<size_t>(sources[r] * k)], k,
                &b[static_cast<size_t>(r * k)]);
  }
  std::vector<uint8_t> inv(static_cast<size_t>(k * k));
  if (gf_invert_matrix(b.data(), inv.data(), k) != 0) {
    return Status::Corruption("EC decode matrix is singular");
  }
  // Output chunk e = row e of the generator times data
  //               = (row e of generator) * B^-1 * sources.
  std::vector<uint8_t> rows(static_cast<size_t>(k) * outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    const uint8_t* g = &encode_matrix_[static_cast<size_t>(outputs[o] * k)];
    for (int j = 0; j < k; ++j) {
      uint8_t acc = 0;
      for (int i = 0; i < k; ++i) {
        acc ^= gf_mul(g[i], inv[static_cast<size_t>(i * k + j)]);
      }
      rows[o * static_cast<size_t>(k) + static_cast<size_t>(j)] = acc;
    }
  }
  auto tables = std::make_shared<std::vector<uint8_t>>(32 * rows.size());
  ec_init_tables(k, static_cast<int>(outputs.size()), rows.data(),
                 tables->data());
  return std::shared_ptr<const std::vector<uint8_t>>(std::move(tables));
}

Status Codec::Reconstruct(std::span<uint8_t* const> chunks,
                          std::span<const int> erased, size_t len,
                          std::span<const int> unavailable) const {
  const int n = k_ + m_;
  if (chunks.size() != static_cast<size_t>(n)) {
    return Status::InvalidArgument("Reconstruct needs k+m chunk pointers");
  }
  STRIPEFS_RETURN_IF_ERROR(CheckLen(len));
  if (erased.empty()) return Status::InvalidArgument("nothing to rebuild");
  uint32_t out_mask = 0, gone_mask = 0;
  for (int e : erased) {
    if (e < 0 || e >= n || (out_mask & (1u << e))) {
      return Status::InvalidArgument("bad or repeated erased index " +
                                     std::to_string(e));
    }
    if (chunks[static_cast<size_t>(e)] == nullptr) {
      return Status::InvalidArgument("null output buffer for chunk " +
                                     std::to_string(e));
    }
    out_mask |= 1u << e;
  }
  for (int u : unavailable) {
    if (u < 0 || u >= n || ((out_mask | gone_mask) & (1u << u))) {
      return Status::InvalidArgument("bad or repeated unavailable index " +
                                     std::to_string(u));
    }
    gone_mask |= 1u << u;
  }
  int sources[kMaxChunks];
  const uint8_t* src_ptrs[kMaxChunks];
  int found = 0;
  for (int i = 0; i < n && found < k_; ++i) {
    if ((out_mask | gone_mask) & (1u << i)) continue;
    if (chunks[static_cast<size_t>(i)] == nullptr) {
      return Status::InvalidArgument("null surviving chunk " +
                                     std::to_string(i));
    }
    sources[found] = i;
    src_ptrs[found] = chunks[static_cast<size_t>(i)];
    ++found;
  }
  if (found < k_) {
    return Status::IoError(
        "too many lost chunks: " + std::to_string(n - found) + " of " +
        std::to_string(n) + " unavailable, at most " + std::to_string(m_) +
        " can be rebuilt");
  }
  // Outputs in ascending index order, matching the cache key (no heap
  // allocation on this path: it runs once per degraded read).
  int outputs[kMaxChunks];
  const size_t n_out = erased.size();
  std::copy(erased.begin(), erased.end(), outputs);
  std::sort(outputs, outputs + n_out);
  uint32_t src_mask = 0;
  for (int i = 0; i < k_; ++i) src_mask |= 1u << sources[i];

  const uint64_t key = DecodeTableCache::Key(src_mask, out_mask);
  DecodeTableCache::Tables tables = cache_.Find(key);
  if (!tables) {
    auto built = BuildDecodeTables(std::span<const int>(sources, k_),
                                   std::span<const int>(outputs, n_out));
    if (!built.ok()) return built.status();
    tables = *built;
    cache_.Insert(key, tables);
  }
  uint8_t* out_ptrs[kMaxChunks];
  for (size_t o = 0; o < n_out; ++o) {
    out_ptrs[o] = chunks[static_cast<size_t>(outputs[o])];
  }
  ec_encode_data(static_cast<int>(len), k_, static_cast<int>(n_out),
                 const_cast<unsigned char*>(tables->data()),
                 const_cast<unsigned char**>(src_ptrs), out_ptrs);
  return Status::Ok();
}

Status Codec::UpdateParityWithDelta(int data_index, const uint8_t* delta,
                                    std::span<uint8_t* const> parity,
                                    size_t len) const {
  if (data_index < 0 || data_index >= k_) {
    return Status::InvalidArgument("data index " + std::to_string(data_index) +
                                   " out of range");
  }
  if (parity.size() != static_cast<size_t>(m_) || delta == nullptr) {
    return Status::InvalidArgument("UpdateParity needs a delta and m parity");
  }
  for (auto* p : parity)
    if (p == nullptr) return Status::InvalidArgument("null parity buffer");
  STRIPEFS_RETURN_IF_ERROR(CheckLen(len));
  // GF(2^8) is linear: P' = P + g_i * (D_old + D_new).
  ec_encode_data_update(static_cast<int>(len), k_, m_, data_index,
                        const_cast<unsigned char*>(encode_tables_.data()),
                        const_cast<unsigned char*>(delta),
                        const_cast<unsigned char**>(parity.data()));
  return Status::Ok();
}

Status Codec::UpdateParity(int data_index, const uint8_t* old_data,
                           const uint8_t* new_data,
                           std::span<uint8_t* const> parity, size_t len) const {
  if (old_data == nullptr || new_data == nullptr) {
    return Status::InvalidArgument("UpdateParity needs old and new data");
  }
  STRIPEFS_RETURN_IF_ERROR(CheckLen(len));
  // GF(2^8) is linear, so P + g (old + new) = (P + g old) + g new: two
  // multiply-adds straight from the caller's buffers, no delta buffer and
  // no XOR pass (a byte-wise XOR into a fresh vector cost ~2x the update).
  STRIPEFS_RETURN_IF_ERROR(
      UpdateParityWithDelta(data_index, old_data, parity, len));
  return UpdateParityWithDelta(data_index, new_data, parity, len);
}

}  // namespace stripefs::ec

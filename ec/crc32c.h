// CRC32C (Castagnoli), the checksum of every stored chunk and wire frame,
// computed with ISA-L's crc32_iscsi. Pure functions; thread-safe.
//
// Combining: the CRC of A||B follows from CRC(A), CRC(B) and len(B) alone
// (a multiplication by x^(8*len(B)) modulo the polynomial in GF(2), as
// zlib's crc32_combine), so a chunk's whole CRC comes from its per-block
// CRCs without a second pass over the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stripefs::ec {

// Standard CRC32C of `len` bytes: Crc32c("123456789") == 0xE3069283.
// Chain pieces by passing the previous result as `crc`.
uint32_t Crc32c(const void* data, size_t len, uint32_t crc = 0);

// The operator that appends `len` bytes in Crc32cCombineWith: x^(8*len)
// modulo the CRC32C polynomial (O(log len) to compute; reuse it for many
// pieces of the same length).
uint32_t Crc32cShiftOperator(size_t len);

// Crc32c(A||B) from crc_a = Crc32c(A), crc_b = Crc32c(B) and
// shift = Crc32cShiftOperator(len(B)).
uint32_t Crc32cCombineWith(uint32_t shift, uint32_t crc_a, uint32_t crc_b);

// The same, computing the operator for len_b.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

}  // namespace stripefs::ec

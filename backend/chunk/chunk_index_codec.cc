#include "backend/chunk/chunk_index_codec.h"

#include <algorithm>
#include <cstdio>

#include "common/coding.h"
#include "ec/crc32c.h"

namespace stripefs {
using coding::LoadBe;
using coding::PutBe;

std::string EncodeChunkIdPrefix(const ChunkId& id) {
  std::string k;
  k.reserve(kChunkKeySize);
  k.push_back(kChunkKeyPrefix);
  PutBe(&k, id.inode);
  PutBe(&k, id.stripe);
  PutBe(&k, id.index);
  return k;
}

std::string EncodeChunkKey(const ChunkId& id, uint64_t version) {
  std::string k = EncodeChunkIdPrefix(id);
  PutBe(&k, version);
  return k;
}

Status DecodeChunkKey(std::string_view key, ChunkId* id, uint64_t* version) {
  if (key.size() != kChunkKeySize || key[0] != kChunkKeyPrefix) {
    return Status::Corruption(
        "chunk index key of " + std::to_string(key.size()) +
        " bytes is malformed (expected " + std::to_string(kChunkKeySize) + ")");
  }
  const char* p = key.data() + 1;
  id->inode = LoadBe<uint64_t>(p);
  id->stripe = LoadBe<uint64_t>(p + 8);
  id->index = LoadBe<uint32_t>(p + 16);
  *version = LoadBe<uint64_t>(p + 20);
  return Status::Ok();
}

std::vector<uint32_t> ComputeBlockCrcs(const uint8_t* data, size_t len,
                                       uint8_t block_shift, uint32_t* whole) {
  const size_t block = size_t{1} << block_shift;
  std::vector<uint32_t> crcs;
  crcs.reserve((len + block - 1) / block);
  const uint32_t shift = whole != nullptr ? ec::Crc32cShiftOperator(block) : 0;
  uint32_t all = 0;
  for (size_t off = 0; off < len; off += block) {
    const size_t n = std::min(block, len - off);
    const uint32_t crc = ec::Crc32c(data + off, n);
    crcs.push_back(crc);
    if (whole == nullptr) continue;
    all = n == block ? ec::Crc32cCombineWith(shift, all, crc)
                     : ec::Crc32cCombine(all, crc, n);
  }
  if (whole != nullptr) *whole = all;
  return crcs;
}

std::string EncodeChunkValue(const ChunkIndexValue& v) {
  std::string s;
  s.reserve(kChunkValueSize + 1 + kChunkSegmentRefSize +
            4 * v.block_crcs.size());
  // Format 3 needs block CRCs (the encoder's callers always compute them).
  const uint8_t format = v.in_segment         ? kChunkValueFormatSegment
                         : v.block_shift == 0 ? kChunkValueFormatWhole
                                              : kChunkValueFormatBlocks;
  s.push_back(static_cast<char>(format));
  PutBe(&s, v.length);
  PutBe(&s, v.crc32c);
  PutBe(&s, v.flags);
  if (format != kChunkValueFormatWhole) {
    s.push_back(static_cast<char>(v.block_shift));
    if (v.in_segment) {
      PutBe(&s, v.segment);
      PutBe(&s, v.offset);
    }
    for (uint32_t c : v.block_crcs) PutBe(&s, c);
  }
  return s;
}

Result<ChunkIndexValue> DecodeChunkValue(std::string_view value) {
  if (value.size() < kChunkValueSize) {
    return Status::Corruption("chunk index value of " +
                              std::to_string(value.size()) +
                              " bytes is malformed (at least " +
                              std::to_string(kChunkValueSize) + " expected)");
  }
  const auto format = static_cast<uint8_t>(value[0]);
  if (format != kChunkValueFormatWhole && format != kChunkValueFormatBlocks &&
      format != kChunkValueFormatSegment) {
    return Status::Corruption(
        "chunk index value has unknown format " + std::to_string(format) +
        " (this build reads formats 1 to 3; was the store written by a newer "
        "stripefs?)");
  }
  ChunkIndexValue v;
  v.length = LoadBe<uint32_t>(value.data() + 1);
  v.crc32c = LoadBe<uint32_t>(value.data() + 5);
  v.flags = LoadBe<uint32_t>(value.data() + 9);
  if (format == kChunkValueFormatWhole) {
    if (value.size() != kChunkValueSize) {
      return Status::Corruption("chunk index value (format 1) of " +
                                std::to_string(value.size()) +
                                " bytes is malformed (expected " +
                                std::to_string(kChunkValueSize) + ")");
    }
    return v;
  }
  const size_t head =
      kChunkValueSize + 1 +
      (format == kChunkValueFormatSegment ? kChunkSegmentRefSize : 0);
  const std::string fmt = "(format " + std::to_string(format) + ")";
  if (value.size() < head) {
    return Status::Corruption("chunk index value " + fmt + " is truncated");
  }
  v.block_shift = static_cast<uint8_t>(value[kChunkValueSize]);
  if (v.block_shift < kChunkCrcBlockShiftMin ||
      v.block_shift > kChunkCrcBlockShiftMax) {
    return Status::Corruption("chunk index value has a block shift of " +
                              std::to_string(v.block_shift) + " (allowed " +
                              std::to_string(kChunkCrcBlockShiftMin) + "-" +
                              std::to_string(kChunkCrcBlockShiftMax) + ")");
  }
  const uint64_t block = uint64_t{1} << v.block_shift;
  const uint64_t blocks = (uint64_t{v.length} + block - 1) / block;
  if (format == kChunkValueFormatSegment) {
    v.in_segment = true;
    v.segment = LoadBe<uint64_t>(value.data() + kChunkValueSize + 1);
    v.offset = LoadBe<uint64_t>(value.data() + kChunkValueSize + 9);
    if (v.offset % kSegmentAlign != 0 ||
        v.offset > UINT64_MAX - SegmentExtentBytes(v.length)) {
      return Status::Corruption("chunk index value " + fmt +
                                " has a misaligned or overflowing offset " +
                                std::to_string(v.offset));
    }
  }
  if (value.size() - head != 4 * blocks) {
    return Status::Corruption(
        "chunk index value " + fmt + " of " + std::to_string(value.size()) +
        " bytes does not hold the " + std::to_string(blocks) +
        " block CRCs of a " + std::to_string(v.length) + "-byte chunk");
  }
  v.block_crcs.resize(blocks);
  const char* p = value.data() + head;
  for (uint64_t i = 0; i < blocks; ++i)
    v.block_crcs[i] = LoadBe<uint32_t>(p + 4 * i);
  return v;
}

std::string DescribeChunk(const ChunkId& id, uint64_t version) {
  char buf[128];
  std::snprintf(buf, sizeof(buf),
                "chunk (inode 0x%llx, stripe %llu, index %u, version 0x%llx)",
                static_cast<unsigned long long>(id.inode),
                static_cast<unsigned long long>(id.stripe), id.index,
                static_cast<unsigned long long>(version));
  return buf;
}

}  // namespace stripefs

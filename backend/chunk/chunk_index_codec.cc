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

uint32_t CombineBlockCrcs(const std::vector<uint32_t>& crcs, uint64_t length,
                          uint8_t block_shift) {
  const uint64_t block = uint64_t{1} << block_shift;
  const uint32_t shift = ec::Crc32cShiftOperator(block);
  uint32_t all = 0;
  uint64_t off = 0;
  for (uint32_t crc : crcs) {
    const uint64_t n = std::min(block, length - std::min(length, off));
    all = n == block ? ec::Crc32cCombineWith(shift, all, crc)
                     : ec::Crc32cCombine(all, crc, n);
    off += block;
  }
  return all;
}

namespace {

// A value whose bytes are one extent at chunk offset 0: format 3.
bool IsOnePiece(const ChunkIndexValue& v) {
  return v.pieces.empty() ||
         (v.pieces.size() == 1 && v.pieces[0].chunk_offset == 0 &&
          v.pieces[0].length == v.length);
}

}  // namespace

std::string EncodeChunkValue(const ChunkIndexValue& v) {
  const uint8_t format = !v.in_segment
                             ? (v.block_shift == 0 ? kChunkValueFormatWhole
                                                   : kChunkValueFormatBlocks)
                         : IsOnePiece(v) ? kChunkValueFormatSegment
                                         : kChunkValueFormatPieces;
  std::string s;
  s.reserve(kChunkValueSize + 1 + 4 + kChunkPieceSize * v.pieces.size() +
            4 * v.block_crcs.size());
  // Formats 3 and 4 need block CRCs (the encoder's callers always compute
  // them).
  s.push_back(static_cast<char>(format));
  PutBe(&s, v.length);
  PutBe(&s, v.crc32c);
  PutBe(&s, v.flags);
  if (format != kChunkValueFormatWhole) {
    s.push_back(static_cast<char>(v.block_shift));
    if (format == kChunkValueFormatSegment) {
      PutBe(&s, v.pieces.empty() ? uint64_t{0} : v.pieces[0].segment);
      PutBe(&s, v.pieces.empty() ? uint64_t{0} : v.pieces[0].segment_offset);
    } else if (format == kChunkValueFormatPieces) {
      PutBe(&s, static_cast<uint32_t>(v.pieces.size()));
      for (const ChunkPiece& p : v.pieces) {
        PutBe(&s, p.chunk_offset);
        PutBe(&s, p.length);
        PutBe(&s, p.segment);
        PutBe(&s, p.segment_offset);
      }
    }
    for (uint32_t c : v.block_crcs) PutBe(&s, c);
  }
  return s;
}

namespace {

// A piece whose segment offset is misaligned or overflows with its extent.
bool BadPlace(const ChunkPiece& p) {
  return p.segment_offset % kSegmentAlign != 0 ||
         p.segment_offset > UINT64_MAX - SegmentExtentBytes(p.length);
}

// Format 3's one extent (after the block shift) into v->pieces.
Status DecodeSegmentRef(std::string_view value, const std::string& fmt,
                        ChunkIndexValue* v) {
  v->in_segment = true;
  ChunkPiece p;
  p.length = v->length;
  p.segment = LoadBe<uint64_t>(value.data() + kChunkValueSize + 1);
  p.segment_offset = LoadBe<uint64_t>(value.data() + kChunkValueSize + 9);
  if (BadPlace(p)) {
    return Status::Corruption("chunk index value " + fmt +
                              " has a misaligned or overflowing offset " +
                              std::to_string(p.segment_offset));
  }
  if (v->length == 0 && (p.segment != 0 || p.segment_offset != 0)) {
    return Status::Corruption("chunk index value " + fmt +
                              " of an empty chunk names an extent");
  }
  if (v->length > 0) v->pieces.push_back(p);
  return Status::Ok();
}

// Format 4's piece list (its count after the block shift, the pieces from
// *head on) into v->pieces; *head moves past them.
Status DecodePieces(std::string_view value, const std::string& fmt,
                    ChunkIndexValue* v, size_t* head) {
  v->in_segment = true;
  const uint64_t n = LoadBe<uint32_t>(value.data() + kChunkValueSize + 1);
  if (n > (value.size() - *head) / kChunkPieceSize) {
    return Status::Corruption("chunk index value " + fmt + " names " +
                              std::to_string(n) +
                              " pieces but is too short for them");
  }
  const char* p = value.data() + *head;
  uint64_t next = 0;  // where the next piece must start in the chunk
  v->pieces.resize(n);
  for (uint64_t i = 0; i < n; ++i, p += kChunkPieceSize) {
    ChunkPiece& c = v->pieces[i];
    c.chunk_offset = LoadBe<uint32_t>(p);
    c.length = LoadBe<uint32_t>(p + 4);
    c.segment = LoadBe<uint64_t>(p + 8);
    c.segment_offset = LoadBe<uint64_t>(p + 16);
    if (c.chunk_offset != next || c.length == 0 ||
        c.chunk_offset % kSegmentAlign != 0 || BadPlace(c) ||
        uint64_t{c.chunk_offset} + c.length > v->length) {
      return Status::Corruption(
          "chunk index value " + fmt + ": piece " + std::to_string(i) + " ([" +
          std::to_string(c.chunk_offset) + ", +" + std::to_string(c.length) +
          ") at segment offset " + std::to_string(c.segment_offset) +
          ") is misplaced, misaligned or empty");
    }
    next = uint64_t{c.chunk_offset} + c.length;
  }
  if (next != v->length) {
    return Status::Corruption("chunk index value " + fmt +
                              ": its pieces cover " + std::to_string(next) +
                              " of " + std::to_string(v->length) + " bytes");
  }
  if (IsOnePiece(*v)) {
    return Status::Corruption("chunk index value " + fmt +
                              " of one piece (that is format 3)");
  }
  *head += n * kChunkPieceSize;
  return Status::Ok();
}

}  // namespace

Result<ChunkIndexValue> DecodeChunkValue(std::string_view value) {
  if (value.size() < kChunkValueSize) {
    return Status::Corruption("chunk index value of " +
                              std::to_string(value.size()) +
                              " bytes is malformed (at least " +
                              std::to_string(kChunkValueSize) + " expected)");
  }
  const auto format = static_cast<uint8_t>(value[0]);
  if (format < kChunkValueFormatWhole || format > kChunkValueFormatPieces) {
    return Status::Corruption(
        "chunk index value has unknown format " + std::to_string(format) +
        " (this build reads formats 1 to 4; was the store written by a newer "
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
  const std::string fmt = "(format " + std::to_string(format) + ")";
  size_t head = kChunkValueSize + 1;
  if (format == kChunkValueFormatSegment) head += kChunkSegmentRefSize;
  if (format == kChunkValueFormatPieces) head += 4;
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
    STRIPEFS_RETURN_IF_ERROR(DecodeSegmentRef(value, fmt, &v));
  } else if (format == kChunkValueFormatPieces) {
    STRIPEFS_RETURN_IF_ERROR(DecodePieces(value, fmt, &v, &head));
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

std::string EncodePendingKey(uint64_t batch) {
  std::string k;
  k.reserve(kPendingKeySize);
  k.push_back(kPendingKeyPrefix);
  PutBe(&k, batch);
  return k;
}

Status DecodePendingKey(std::string_view key, uint64_t* batch) {
  if (key.size() != kPendingKeySize || key[0] != kPendingKeyPrefix) {
    return Status::Corruption("pending record key of " +
                              std::to_string(key.size()) +
                              " bytes is malformed (expected " +
                              std::to_string(kPendingKeySize) + ")");
  }
  *batch = LoadBe<uint64_t>(key.data() + 1);
  return Status::Ok();
}

std::string EncodePendingRecord(const std::vector<PendingEntry>& entries) {
  std::string s;
  s.push_back(static_cast<char>(kPendingRecordFormat));
  PutBe(&s, static_cast<uint32_t>(entries.size()));
  for (const PendingEntry& e : entries) {
    s += EncodeChunkKey(e.id, e.version);
    PutBe(&s, e.piece.chunk_offset);
    PutBe(&s, e.piece.length);
    PutBe(&s, e.piece.segment);
    PutBe(&s, e.piece.segment_offset);
    const std::string old = e.has_old ? EncodeChunkValue(e.old) : "";
    PutBe(&s, static_cast<uint32_t>(old.size()));
    s += old;
  }
  return s;
}

Result<std::vector<PendingEntry>> DecodePendingRecord(std::string_view value) {
  if (value.size() < 5 ||
      static_cast<uint8_t>(value[0]) != kPendingRecordFormat) {
    return Status::Corruption("pending record of " +
                              std::to_string(value.size()) +
                              " bytes is malformed (short or unknown format)");
  }
  const uint64_t n = LoadBe<uint32_t>(value.data() + 1);
  if (n > (value.size() - 5) / kPendingEntryFixedSize) {
    return Status::Corruption("pending record names " + std::to_string(n) +
                              " entries but is too short for them");
  }
  std::vector<PendingEntry> out(n);
  size_t at = 5;
  for (uint64_t i = 0; i < n; ++i) {
    const std::string what = "pending record entry " + std::to_string(i);
    if (value.size() - at < kPendingEntryFixedSize) {
      return Status::Corruption(what + " is truncated");
    }
    PendingEntry& e = out[i];
    STRIPEFS_RETURN_IF_ERROR(
        DecodeChunkKey(value.substr(at, kChunkKeySize), &e.id, &e.version));
    const char* p = value.data() + at + kChunkKeySize;
    e.piece.chunk_offset = LoadBe<uint32_t>(p);
    e.piece.length = LoadBe<uint32_t>(p + 4);
    e.piece.segment = LoadBe<uint64_t>(p + 8);
    e.piece.segment_offset = LoadBe<uint64_t>(p + 16);
    const uint64_t old_len = LoadBe<uint32_t>(p + 24);
    at += kPendingEntryFixedSize;
    const ChunkPiece& c = e.piece;
    if (c.length == 0 || c.chunk_offset % kSegmentAlign != 0 ||
        c.segment_offset % kSegmentAlign != 0 ||
        c.segment_offset > UINT64_MAX - SegmentExtentBytes(c.length)) {
      return Status::Corruption(what + " names an empty, misaligned or " +
                                "overflowing piece");
    }
    if (old_len > value.size() - at) {
      return Status::Corruption(what + ": its old value is truncated");
    }
    if (old_len > 0) {
      auto old = DecodeChunkValue(value.substr(at, old_len));
      if (!old.ok()) return old.status().Annotate(what);
      e.has_old = true;
      e.old = std::move(*old);
      at += old_len;
    }
  }
  if (at != value.size()) {
    return Status::Corruption("pending record has " +
                              std::to_string(value.size() - at) +
                              " trailing bytes");
  }
  return out;
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

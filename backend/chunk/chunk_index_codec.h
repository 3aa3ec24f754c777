// ChunkIndexCodec: the byte format of the chunk store's RocksDB index.
//
// Key   = 'c' | inode u64 | stripe u64 | index u32 | version u64  (29 bytes,
//         big-endian, so RocksDB's bytewise order is (inode, stripe, index,
//         version) order).
// Value = format u8 (=1) | length u32 | crc32c u32 | flags u32     (13 bytes,
//         big-endian).
// Decoders are bounds-checked and return Corruption for anything malformed.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "backend/chunk/chunk_service.h"
#include "common/status.h"

namespace stripefs {

inline constexpr char kChunkKeyPrefix = 'c';
inline constexpr size_t kChunkKeySize = 1 + 8 + 8 + 4 + 8;
// Prefix of all versions of one chunk id: 'c' | inode | stripe | index.
inline constexpr size_t kChunkIdPrefixSize = 1 + 8 + 8 + 4;
inline constexpr uint8_t kChunkValueFormat = 1;
inline constexpr size_t kChunkValueSize = 1 + 4 + 4 + 4;

struct ChunkIndexValue {
  uint32_t length = 0;
  uint32_t crc32c = 0;
  uint32_t flags = 0;  // reserved, 0 today
};

std::string EncodeChunkKey(const ChunkId& id, uint64_t version);
// The first kChunkIdPrefixSize bytes of every key of `id`.
std::string EncodeChunkIdPrefix(const ChunkId& id);
// Decodes a key into (id, version); Corruption if malformed.
Status DecodeChunkKey(std::string_view key, ChunkId* id, uint64_t* version);

std::string EncodeChunkValue(const ChunkIndexValue& v);
Result<ChunkIndexValue> DecodeChunkValue(std::string_view value);

// "inode 0x.. stripe N index I version 0x..": how messages name a chunk.
std::string DescribeChunk(const ChunkId& id, uint64_t version);

}  // namespace stripefs

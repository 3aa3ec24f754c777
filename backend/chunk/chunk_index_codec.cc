#include "backend/chunk/chunk_index_codec.h"

#include <cstdio>

namespace stripefs {
namespace {

void PutBe64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutBe32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetBe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint32_t GetBe32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

std::string EncodeChunkIdPrefix(const ChunkId& id) {
  std::string k;
  k.reserve(kChunkKeySize);
  k.push_back(kChunkKeyPrefix);
  PutBe64(&k, id.inode);
  PutBe64(&k, id.stripe);
  PutBe32(&k, id.index);
  return k;
}

std::string EncodeChunkKey(const ChunkId& id, uint64_t version) {
  std::string k = EncodeChunkIdPrefix(id);
  PutBe64(&k, version);
  return k;
}

Status DecodeChunkKey(std::string_view key, ChunkId* id, uint64_t* version) {
  if (key.size() != kChunkKeySize || key[0] != kChunkKeyPrefix) {
    return Status::Corruption(
        "chunk index key of " + std::to_string(key.size()) +
        " bytes is malformed (expected " + std::to_string(kChunkKeySize) + ")");
  }
  const char* p = key.data() + 1;
  id->inode = GetBe64(p);
  id->stripe = GetBe64(p + 8);
  id->index = GetBe32(p + 16);
  *version = GetBe64(p + 20);
  return Status::Ok();
}

std::string EncodeChunkValue(const ChunkIndexValue& v) {
  std::string s;
  s.reserve(kChunkValueSize);
  s.push_back(static_cast<char>(kChunkValueFormat));
  PutBe32(&s, v.length);
  PutBe32(&s, v.crc32c);
  PutBe32(&s, v.flags);
  return s;
}

Result<ChunkIndexValue> DecodeChunkValue(std::string_view value) {
  if (value.size() != kChunkValueSize) {
    return Status::Corruption("chunk index value of " +
                              std::to_string(value.size()) +
                              " bytes is malformed (expected " +
                              std::to_string(kChunkValueSize) + ")");
  }
  if (static_cast<uint8_t>(value[0]) != kChunkValueFormat) {
    return Status::Corruption(
        "chunk index value has unknown format " +
        std::to_string(static_cast<uint8_t>(value[0])) +
        " (this build reads format 1; was the store written by a newer "
        "stripefs?)");
  }
  ChunkIndexValue v;
  v.length = GetBe32(value.data() + 1);
  v.crc32c = GetBe32(value.data() + 5);
  v.flags = GetBe32(value.data() + 9);
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

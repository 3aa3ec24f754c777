// libFuzzer target for the chunk index decoders (keys and values read back
// from RocksDB): no crash on any input, and whatever decodes re-encodes to
// exactly the same bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/chunk/chunk_index_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stripefs;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ChunkId id;
  uint64_t version = 0;
  if (DecodeChunkKey(in, &id, &version).ok()) {
    if (EncodeChunkKey(id, version) != in) std::abort();
    if (EncodeChunkIdPrefix(id) != in.substr(0, kChunkIdPrefixSize)) {
      std::abort();
    }
    (void)DescribeChunk(id, version);
  }
  auto value = DecodeChunkValue(in);
  if (value.ok() && EncodeChunkValue(*value) != in) std::abort();
  return 0;
}

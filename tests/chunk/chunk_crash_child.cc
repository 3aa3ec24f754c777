// The writer process of ChunkStoreCrashTest: writes chunks (and deletes some)
// in a loop and reports each acknowledged operation as an 9-byte record
// ('W'|'D', n as u64) on a file descriptor, until it is killed.
// Usage: chunk_crash_child DIR FIRST FD
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "backend/chunk/chunk_store.h"
#include "tests/chunk/chunk_crash_workload.h"
#include "tests/chunk/chunk_payload.h"

int main(int argc, char** argv) {
  using namespace stripefs;
  if (argc != 4) return 2;
  const std::string dir = argv[1];
  const uint64_t first = std::strtoull(argv[2], nullptr, 10);
  const int fd = std::atoi(argv[3]);
  ChunkStoreOptions o;
  o.reserve_bytes = 0;
  auto s = ChunkStore::Open(dir, o);
  if (!s.ok()) return 3;
  auto& store = *s;
  auto report = [fd](uint8_t op, uint64_t n) {
    uint8_t rec[9];
    rec[0] = op;
    for (int i = 0; i < 8; ++i) rec[1 + i] = static_cast<uint8_t>(n >> (8 * i));
    if (::write(fd, rec, sizeof(rec)) != sizeof(rec)) std::_Exit(5);
  };
  for (uint64_t n = first; n < first + 100000; ++n) {
    auto data = stripefs::testing::Payload(crash::SizeOf(n), n);
    if (!store->WriteChunk(crash::IdOf(n), 1, data).ok()) return 4;
    report('W', n);
    if (n % 3 == 0 && n >= first + 2) {
      if (!store->DeleteChunk(crash::IdOf(n - 2), 0).ok()) return 6;
      report('D', n - 2);
    }
  }
  return 0;
}

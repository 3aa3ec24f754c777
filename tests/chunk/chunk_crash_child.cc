// The writer process of ChunkStoreCrashTest: writes chunks (and deletes some)
// in a loop and reports each acknowledged operation as an 9-byte record
// ('W'|'D', n as u64) on a file descriptor, until it is killed.
// Usage: chunk_crash_child DIR FIRST FD THREADS
// With THREADS > 1, writer t writes FIRST + t, FIRST + t + THREADS, ... (no
// deletes), so that group commits carry many writes. Records are smaller
// than PIPE_BUF, so concurrent reports never interleave. With THREADS = 0,
// the patch workload of chunk_crash_workload.h (records 'W', '2', '3', '4',
// 'D' per n); with THREADS = -1, that workload in ApplyChunkOps batches.
// With THREADS = -2, the one-writer workload (writes, deletes) with no hole
// punching and a second thread compacting every sealed segment with dead
// bytes in a loop (Compact(true)), reporting ('K', chunks moved) after each
// compaction that moved something: kills land mid-compaction.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backend/chunk/chunk_store.h"
#include "common/coding.h"
#include "tests/chunk/chunk_crash_workload.h"
#include "tests/chunk/chunk_payload.h"

int main(int argc, char** argv) {
  using namespace stripefs;
  if (argc != 5) return 2;
  const std::string dir = argv[1];
  const uint64_t first = std::strtoull(argv[2], nullptr, 10);
  const int fd = std::atoi(argv[3]);
  const int threads = std::atoi(argv[4]);
  ChunkStoreOptions o;
  o.reserve_bytes = 0;
  o.segment_bytes = 1 << 20;  // kills land around segment rolls too
  if (threads == -2) {
    o.punch_min_bytes = UINT64_MAX;  // dead bytes stay for compaction
    o.compact_bytes_per_sec = 0;     // the loop below compacts instead
  }
  auto s = ChunkStore::Open(dir, o);
  if (!s.ok()) return 3;
  auto& store = *s;
  auto report = [fd](uint8_t op, uint64_t n) {
    uint8_t rec[9];
    rec[0] = op;
    stripefs::coding::StoreLe(rec + 1, n);
    if (::write(fd, rec, sizeof(rec)) != sizeof(rec)) std::_Exit(5);
  };
  if (threads == 0) {
    for (uint64_t n = first; n < first + 100000; ++n) {
      const ChunkId id = crash::PatchIdOf(n);
      const auto len = static_cast<uint32_t>(crash::PatchSizeOf(n));
      if (!store->WriteChunk(id, 1, crash::PatchedContent(n, 1)).ok()) return 4;
      report('W', n);
      for (uint64_t v : {uint64_t{2}, uint64_t{4}}) {
        if (v == 4) {
          if (!store->CloneChunk(id, 2, 3, len).ok()) return 7;
          report('3', n);
        }
        if (!store
                 ->PatchChunkRanges(id, v - 1, v, len, crash::PatchRanges(n, v),
                                    crash::PatchBytes(n, v))
                 .ok()) {
          return 8;
        }
        report(static_cast<uint8_t>('0' + v), n);
      }
      if (!store->DeleteChunkVersion(id, 1).ok()) return 6;
      report('D', n);
    }
    return 0;
  }
  if (threads == -1) {
    constexpr uint64_t kBatch = crash::kPatchBatch;
    for (uint64_t n0 = first; n0 < first + 100000; n0 += kBatch) {
      // The bytes of every op, alive until its batch returns.
      std::vector<std::vector<uint8_t>> keep;
      std::vector<std::vector<PatchRange>> keep_ranges;
      // Runs one op per n (made by `make`), then reports `rec` for each.
      auto step = [&](uint8_t rec, auto make) {
        std::vector<ChunkWriteOp> ops;
        for (uint64_t n = n0; n < n0 + kBatch; ++n) ops.push_back(make(n));
        for (const Status& st : store->ApplyChunkOps(ops)) {
          if (!st.ok()) std::_Exit(8);
        }
        for (uint64_t n = n0; n < n0 + kBatch; ++n) report(rec, n);
      };
      auto len = [](uint64_t n) {
        return static_cast<uint32_t>(crash::PatchSizeOf(n));
      };
      step('W', [&](uint64_t n) {
        keep.push_back(crash::PatchedContent(n, 1));
        return ChunkWriteOp{ChunkWriteOp::Kind::kWrite,
                            crash::PatchIdOf(n),
                            0,
                            1,
                            0,
                            0,
                            keep.back()};
      });
      auto patch = [&](uint64_t n, uint64_t v) {
        keep.push_back(crash::PatchBytes(n, v));
        keep_ranges.push_back(crash::PatchRanges(n, v));
        return ChunkWriteOp{ChunkWriteOp::Kind::kPatch,
                            crash::PatchIdOf(n),
                            v - 1,
                            v,
                            len(n),
                            0,
                            keep.back(),
                            keep_ranges.back()};
      };
      step('2', [&](uint64_t n) { return patch(n, 2); });
      step('3', [&](uint64_t n) {
        return ChunkWriteOp{ChunkWriteOp::Kind::kClone,
                            crash::PatchIdOf(n),
                            2,
                            3,
                            len(n),
                            0,
                            {}};
      });
      step('4', [&](uint64_t n) { return patch(n, 4); });
      std::vector<ChunkVersion> doomed;
      for (uint64_t n = n0; n < n0 + kBatch; ++n)
        doomed.push_back({crash::PatchIdOf(n), 1});
      if (!store->DeleteChunkVersions(doomed).ok()) return 6;
      for (uint64_t n = n0; n < n0 + kBatch; ++n) report('D', n);
    }
    return 0;
  }
  if (threads > 1) {
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t) {
      writers.emplace_back([&, t] {
        for (uint64_t n = first + static_cast<uint64_t>(t); n < first + 100000;
             n += static_cast<uint64_t>(threads)) {
          auto data = stripefs::testing::Payload(crash::SizeOf(n), n);
          if (!store->WriteChunk(crash::IdOf(n), 1, data).ok()) std::_Exit(4);
          report('W', n);
        }
      });
    }
    for (auto& w : writers) w.join();
    return 0;
  }
  if (threads == -2) {
    std::thread([&store, &report] {
      for (int i = 0; i < 1000000; ++i) {
        auto rep = store->Compact(true);
        if (!rep.ok()) std::_Exit(9);
        if (rep->chunks_moved) report('K', rep->chunks_moved);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }).detach();
  }
  for (uint64_t n = first; n < first + 100000; ++n) {
    auto data = stripefs::testing::Payload(crash::SizeOf(n), n);
    if (!store->WriteChunk(crash::IdOf(n), 1, data).ok()) return 4;
    report('W', n);
    if (n % 3 == 0 && n >= first + 2) {
      if (!store->DeleteChunk(crash::IdOf(n - 2), 0).ok()) return 6;
      report('D', n - 2);
    }
  }
  std::_Exit(0);  // the compactor (THREADS -2) may still run
}

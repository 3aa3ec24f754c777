// chunk_store_bench: durable chunk writes of the chunk store alone, next to
// the disk's reference measured in the same run on the same directory.
//
//   chunk_store_bench DIR [--mib N] [--writers W] [--chunk-kib K]
//                         [--io-uring 0|1] [--patch-kib P]
//                         [--version-cache-kib C]
//
// With --patch-kib P: instead, parity-delta style updates. W threads write
// N MiB of K KiB chunks, then for a fixed time patch P KiB windows at random
// block offsets of them (version v -> v + 1, then delete v, as the version
// collector would), once with ChunkStore::PatchChunk (only the window is
// written) and once with the ChunkService default it replaced (read the
// whole chunk, write it whole), side by side on the same store, and prints
// patches/s, the chunk bytes written per patch and the ratio, and the CPU
// time (user + system, all threads) per PatchChunk + DeleteChunkVersion of
// the last PatchChunk run with the version cache's hits and misses in it
// (--version-cache-kib: ChunkStoreOptions::version_cache_bytes in KiB, 0
// for none; default the store's default).
//
// Runs fio (O_DIRECT, libaio, QD = W, K KiB blocks, N MiB, end_fsync) in
// DIR/fio, then W threads writing N MiB of K KiB chunks into a fresh store in
// DIR/store (each WriteChunk durable before it returns), then fio with W
// jobs each writing + fdatasyncing every block (durable_ref: one sync per
// write, no index), then the first fio again; the reference is the mean of
// the two QD runs. Prints one row with ratio=store/reference, the syncs per
// MiB, batches per second, syncs per batch, the mean WriteChunk latency and
// where it goes (the store's timing counters), the CPU time the store run
// took per MiB (user + system of this process, all threads; fio is a child
// and not counted), and the load average before and after. Removes what it
// wrote.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend/chunk/chunk_store.h"

namespace {

using stripefs::ChunkStore;

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// fio's write bandwidth in MiB/s (all jobs), or < 0 (with a message) when
// fio fails. `job`: the flags after --directory.
double RunFio(const std::string& dir, const std::string& job) {
  std::filesystem::create_directories(dir);
  const std::string cmd = "fio --name=disk_ref --directory=" + dir + " " + job +
                          " --output-format=json 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  std::filesystem::remove_all(dir);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (rc != 0 || j.is_discarded() || !j.contains("jobs")) {
    std::fprintf(stderr,
                 "chunk_store_bench: fio failed (rc %d); is fio "
                 "installed and does %s take O_DIRECT?\n",
                 rc, dir.c_str());
    return -1;
  }
  const double bw = j["jobs"][0]["write"]["bw_bytes"].get<double>();
  return bw / (1 << 20);
}

// The disk reference: `qd` writes in flight, one sync at the end.
double RunFioRef(const std::string& dir, uint64_t mib, int qd, int chunk_kib) {
  return RunFio(dir, "--rw=write --ioengine=libaio --direct=1 --bs=" +
                         std::to_string(chunk_kib) +
                         "k --iodepth=" + std::to_string(qd) +
                         " --size=" + std::to_string(mib) + "m --end_fsync=1");
}

// What durable writes without group commit and without an index get:
// `jobs` threads, each writing its share of one fallocated file in K KiB
// O_DIRECT writes with an fdatasync after each (the store's crash rules for
// data alone, one sync per write).
double RunFioDurable(const std::string& dir, uint64_t mib, int jobs,
                     int chunk_kib) {
  const uint64_t share =
      std::max<uint64_t>(mib / static_cast<uint64_t>(jobs), 1);
  return RunFio(dir, "--rw=write --ioengine=psync --direct=1 --bs=" +
                         std::to_string(chunk_kib) +
                         "k --numjobs=" + std::to_string(jobs) +
                         " --filename=durable --fallocate=native --filesize=" +
                         std::to_string(share * static_cast<uint64_t>(jobs)) +
                         "m --size=" + std::to_string(share) +
                         "m --offset_increment=" + std::to_string(share) +
                         "m --fdatasync=1 --group_reporting");
}

// User + system CPU seconds of this process so far (every thread).
double ProcessCpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

struct StoreRun {
  double mib_per_s = 0;
  double cpu_ms_per_mib = 0;
  double secs = 0;
  double write_ms = 0;  // mean WriteChunk latency (submit to acknowledged)
  stripefs::ChunkStoreCounters counters;
};

bool RunStore(const std::string& dir, uint64_t mib, int writers, int chunk_kib,
              uint32_t spares, bool io_uring, StoreRun* out) {
  std::filesystem::remove_all(dir);
  stripefs::ChunkStoreOptions o;
  o.use_io_uring = io_uring;
  o.compact_bytes_per_sec = 0;  // nothing to compact: only new chunks
  o.spare_segments = spares;
  auto s = ChunkStore::Open(dir, o);
  if (!s.ok()) {
    std::fprintf(stderr, "chunk_store_bench: %s\n",
                 s.status().ToString().c_str());
    return false;
  }
  auto& store = *s;
  const size_t chunk = static_cast<size_t>(chunk_kib) << 10;
  const uint64_t total = (mib << 20) / chunk;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> write_ns{0};
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < writers; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> data(chunk);
      for (size_t i = 0; i < chunk; ++i) {
        data[i] = static_cast<uint8_t>(i * 131 + static_cast<size_t>(t));
      }
      for (uint64_t n = next++; n < total && !failed; n = next++) {
        data[0] = static_cast<uint8_t>(n);
        const auto t0 = std::chrono::steady_clock::now();
        stripefs::Status st = store->WriteChunk({1, n, 0}, 1, data);
        write_ns += static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - t0)
                .count());
        if (!st.ok()) {
          std::fprintf(stderr, "chunk_store_bench: %s\n",
                       st.ToString().c_str());
          failed = true;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  out->counters = store->Counters();
  const double written_mib = static_cast<double>(total * chunk) / (1 << 20);
  out->mib_per_s = written_mib / secs;
  out->secs = secs;
  out->write_ms = static_cast<double>(write_ns) / 1e6 /
                  static_cast<double>(std::max<uint64_t>(total, 1));
  out->cpu_ms_per_mib = (ProcessCpuSeconds() - cpu_start) * 1000 / written_mib;
  store.reset();
  std::filesystem::remove_all(dir);
  return !failed;
}

// Patches for `secs` seconds with `writers` threads: chunk n's current
// version is versions[n]. `whole`: the read+write default.
bool RunPatches(ChunkStore* store, std::vector<uint64_t>* versions, int writers,
                int chunk_kib, int patch_kib, bool whole, double secs,
                double* per_sec, double* bytes_per_patch) {
  const uint32_t chunk = static_cast<uint32_t>(chunk_kib) << 10;
  const uint32_t patch = static_cast<uint32_t>(patch_kib) << 10;
  const uint64_t before = store->Counters().bytes_written;
  std::atomic<uint64_t> done{0};
  std::atomic<bool> failed{false};
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(secs);
  std::vector<std::thread> threads;
  const uint64_t chunks = versions->size();
  for (int t = 0; t < writers; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> bytes(patch, static_cast<uint8_t>(t));
      uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(t + 1);
      // Thread t owns chunks t, t + writers, ...
      for (uint64_t i = 0; !failed && std::chrono::steady_clock::now() < end;
           ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const uint64_t per = (chunks + static_cast<uint64_t>(writers) - 1 -
                              static_cast<uint64_t>(t)) /
                             static_cast<uint64_t>(writers);
        if (per == 0) return;
        const uint64_t n = static_cast<uint64_t>(t) +
                           (x % per) * static_cast<uint64_t>(writers);
        const uint32_t blocks = (chunk - patch) / 4096 + 1;
        const auto off = static_cast<uint32_t>((x >> 20) % blocks) * 4096;
        const uint64_t from = (*versions)[n], to = from + 1;
        const stripefs::ChunkId id{1, n, 0};
        stripefs::Status st =
            whole ? store->ChunkService::PatchChunk(id, from, to, chunk, off,
                                                    bytes)
                  : store->PatchChunk(id, from, to, chunk, off, bytes);
        if (st.ok()) st = store->DeleteChunkVersion(id, from);
        if (!st.ok()) {
          std::fprintf(stderr, "chunk_store_bench: %s\n",
                       st.ToString().c_str());
          failed = true;
        }
        (*versions)[n] = to;
        ++done;
      }
    });
  }
  for (auto& th : threads) th.join();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  *per_sec = static_cast<double>(done) / took;
  *bytes_per_patch =
      static_cast<double>(store->Counters().bytes_written - before) /
      static_cast<double>(std::max<uint64_t>(done, 1));
  return !failed;
}

int PatchBench(const std::string& dir, uint64_t mib, int writers, int chunk_kib,
               int patch_kib, bool io_uring, uint64_t version_cache_bytes) {
  if (patch_kib >= chunk_kib) {
    std::fprintf(stderr,
                 "chunk_store_bench: --patch-kib must be below "
                 "--chunk-kib\n");
    return 2;
  }
  const std::string load_before = LoadAverage();
  std::filesystem::remove_all(dir + "/store");
  stripefs::ChunkStoreOptions o;
  o.use_io_uring = io_uring;
  o.version_cache_bytes = version_cache_bytes;
  auto s = ChunkStore::Open(dir + "/store", o);
  if (!s.ok()) {
    std::fprintf(stderr, "chunk_store_bench: %s\n",
                 s.status().ToString().c_str());
    return 1;
  }
  auto& store = *s;
  const size_t chunk = static_cast<size_t>(chunk_kib) << 10;
  const uint64_t total = std::max<uint64_t>(1, (mib << 20) / chunk);
  std::vector<uint8_t> data(chunk, 7);
  for (uint64_t n = 0; n < total; ++n) {
    stripefs::Status st = store->WriteChunk({1, n, 0}, 1, data);
    if (!st.ok()) {
      std::fprintf(stderr, "chunk_store_bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  std::vector<uint64_t> versions(total, 1);
  constexpr double kSecs = 5;
  double window_rate = 0, window_bytes = 0, whole_rate = 0, whole_bytes = 0;
  bool ok = RunPatches(store.get(), &versions, writers, chunk_kib, patch_kib,
                       false, kSecs, &window_rate, &window_bytes) &&
            RunPatches(store.get(), &versions, writers, chunk_kib, patch_kib,
                       true, kSecs, &whole_rate, &whole_bytes);
  // The last run alone: its CPU per patch (+ delete) and cache lookups.
  const stripefs::ChunkStoreCounters c0 = store->Counters();
  const double cpu0 = ProcessCpuSeconds();
  ok = ok && RunPatches(store.get(), &versions, writers, chunk_kib, patch_kib,
                        false, kSecs, &window_rate, &window_bytes);
  const double cpu_s = ProcessCpuSeconds() - cpu0;
  const stripefs::ChunkStoreCounters c1 = store->Counters();
  const double patches = std::max(window_rate * kSecs, 1.0);
  store.reset();
  std::filesystem::remove_all(dir + "/store");
  if (!ok) return 1;
  std::printf(
      "chunk-store patches of %d KiB into %d KiB chunks, %d writers, "
      "%" PRIu64
      " chunks: PatchChunk=%.0f/s (%.0f bytes written per "
      "patch) read+write default=%.0f/s (%.0f bytes per patch) "
      "ratio=%.2f cpu_us_per_patch=%.1f (version cache %" PRIu64
      " KiB: %" PRIu64 " hits, %" PRIu64
      " misses) load_before=%s load_after=%s\n",
      patch_kib, chunk_kib, writers, total, window_rate, window_bytes,
      whole_rate, whole_bytes, window_rate / std::max(whole_rate, 1e-9),
      cpu_s * 1e6 / patches, version_cache_bytes >> 10,
      c1.version_cache_hits - c0.version_cache_hits,
      c1.version_cache_misses - c0.version_cache_misses, load_before.c_str(),
      LoadAverage().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: chunk_store_bench DIR [--mib N] [--writers W] "
                 "[--chunk-kib K] [--io-uring 0|1] [--patch-kib P] "
                 "[--version-cache-kib C]\n");
    return 2;
  }
  const std::string dir = argv[1];
  uint64_t mib = 1024;
  int writers = 8, chunk_kib = 1024, patch_kib = 0;
  bool io_uring = stripefs::ChunkStoreOptions{}.use_io_uring;
  uint64_t version_cache_bytes =
      stripefs::ChunkStoreOptions{}.version_cache_bytes;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (flag == "--io-uring") {
      io_uring = v != 0;
      continue;
    }
    if (flag == "--version-cache-kib" && v >= 0) {
      version_cache_bytes = static_cast<uint64_t>(v) << 10;
      continue;
    }
    if (v <= 0) {
      std::fprintf(stderr, "chunk_store_bench: %s needs a positive number\n",
                   flag.c_str());
      return 2;
    }
    if (flag == "--mib") {
      mib = static_cast<uint64_t>(v);
    } else if (flag == "--writers") {
      writers = static_cast<int>(v);
    } else if (flag == "--chunk-kib") {
      chunk_kib = static_cast<int>(v);
    } else if (flag == "--patch-kib") {
      patch_kib = static_cast<int>(v);
    } else {
      std::fprintf(stderr, "chunk_store_bench: unknown flag %s\n",
                   flag.c_str());
      return 2;
    }
  }
  if (patch_kib > 0) {
    return PatchBench(dir, mib, writers, chunk_kib, patch_kib, io_uring,
                      version_cache_bytes);
  }
  const std::string load_before = LoadAverage();
  const double fio1 = RunFioRef(dir + "/fio", mib, writers, chunk_kib);
  // The default options (preallocated segments), and the same with two
  // zero-filled spare segments, side by side; the spares' own writes run
  // inside the timed window.
  constexpr uint32_t kSpares = 2;
  StoreRun run, spared;
  const bool ok =
      RunStore(dir + "/store", mib, writers, chunk_kib,
               stripefs::ChunkStoreOptions{}.spare_segments, io_uring, &run) &&
      RunStore(dir + "/store", mib, writers, chunk_kib, kSpares, io_uring,
               &spared);
  const double durable = RunFioDurable(dir + "/fio", mib, writers, chunk_kib);
  const double fio2 = RunFioRef(dir + "/fio", mib, writers, chunk_kib);
  const std::string load_after = LoadAverage();
  if (!ok || fio1 < 0 || fio2 < 0 || durable < 0) return 1;
  const double ref = (fio1 + fio2) / 2;
  const auto& c = run.counters;
  const double syncs = static_cast<double>(c.data_syncs + c.index_syncs);
  std::printf("chunk-store durable %d KiB chunks, %d writers, %" PRIu64
              " MiB: store=%.1f MiB/s mib_s=%.1f disk_ref(fio O_DIRECT libaio "
              "QD%d)=%.1f MiB/s "
              "(%.1f, %.1f) ratio=%.2f syncs_per_MiB=%.2f (segment %" PRIu64
              ", index %" PRIu64
              ") writes_per_commit=%.2f cpu_ms_per_MiB=%.3f io=%s "
              "load_before=%s load_after=%s\n",
              chunk_kib, writers, mib, run.mib_per_s, run.mib_per_s, writers,
              ref, fio1, fio2, run.mib_per_s / ref,
              syncs / static_cast<double>(mib), c.data_syncs, c.index_syncs,
              static_cast<double>(c.committed_ops) /
                  static_cast<double>(std::max<uint64_t>(c.commit_batches, 1)),
              run.cpu_ms_per_mib, io_uring ? "io_uring" : "pwrite",
              load_before.c_str(), load_after.c_str());
  // The group commit itself: how often it runs, what each round costs.
  const double batches =
      static_cast<double>(std::max<uint64_t>(c.commit_batches, 1));
  std::printf(
      "  commits: batches_per_s=%.1f syncs_per_batch=%.2f "
      "write_latency_ms=%.2f (mean WriteChunk, submit to ack)\n",
      static_cast<double>(c.commit_batches) / run.secs, syncs / batches,
      run.write_ms);
  // Where a WriteChunk's time goes, ms per write (per sync for the syncs);
  // "other" is CRCs, chunk lock, allocation and waking up after the ack.
  auto per = [](uint64_t ns, uint64_t n) {
    return static_cast<double>(ns) / 1e6 /
           static_cast<double>(std::max<uint64_t>(n, 1));
  };
  const double wait_ms = per(c.commit_wait_ns, c.committed_ops);
  const double write_ms = per(c.data_write_ns, c.data_writes);
  std::printf(
      "  time per write: data_write_ms=%.2f queued_ms=%.2f "
      "commit_wait_ms=%.2f (batch_ms=%.2f: data_sync_ms=%.2f "
      "index_sync_ms=%.2f, in parallel) other_ms=%.2f\n",
      write_ms, per(c.queue_ns, c.committed_ops), wait_ms,
      per(c.batch_ns, c.commit_batches), per(c.data_sync_ns, c.data_syncs),
      per(c.index_sync_ns, c.index_syncs),
      std::max(run.write_ms - write_ms - wait_ms, 0.0));
  std::printf(
      "  durable_ref(fio %d jobs, O_DIRECT write + fdatasync each, one "
      "file)=%.1f MiB/s store/durable_ref=%.2f\n",
      writers, durable, run.mib_per_s / durable);
  std::printf(
      "  with spare_segments=%u: store=%.1f MiB/s ratio=%.2f "
      "syncs_per_MiB=%.2f cpu_ms_per_MiB=%.3f, %" PRIu64
      " segments started as zero-filled spares\n",
      kSpares, spared.mib_per_s, spared.mib_per_s / ref,
      static_cast<double>(spared.counters.data_syncs +
                          spared.counters.index_syncs) /
          static_cast<double>(mib),
      spared.cpu_ms_per_mib, spared.counters.segments_from_spares);
  return 0;
}

// rpc_bench: the RpcServer's io_uring loop against its poll fallback, in
// one process and one run, over 127.0.0.1 with the real RpcClient.
//
// Rows: small-call latency (1 thread, median and p99 of single calls),
// small-call throughput (8 client threads), 1 MiB request bulk (like
// WriteChunk) and 1 MiB reply bulk (like ReadChunk, sent from the handler's
// buffer without a copy) with 1 and 4 client threads. Each round runs every
// row on both loops (order alternating per round); the table shows the
// median over rounds and the uring/poll ratio. The handler does no work, so
// this measures the transport: framing, CRC32C + HMAC on both ends, syscalls
// and thread hand-offs.
//
//   rpc_bench [--rounds N] [--quick] [--only uring|poll]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/rpc/rpc_client.h"
#include "backend/rpc/rpc_server.h"

using namespace stripefs;
using namespace stripefs::rpc;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint16_t kSmall = 0x7E10;
constexpr uint16_t kWrite = 0x7E11;
constexpr uint16_t kRead = 0x7E12;
constexpr size_t kMiB = 1 << 20;

class NullHandler : public RpcHandler {
 public:
  NullHandler() : chunk_(kMiB, 0x5A) {}
  std::string Role() const override { return "bench"; }
  void Handle(const rpc::Caller&, uint16_t type,
              std::span<const uint8_t> payload, AlignedBytes&,
              RpcReply* reply) override {
    reply->payload.assign(payload.begin(), payload.end());
    if (type == kRead) reply->bulk = chunk_;  // no copy
  }

 private:
  std::vector<uint8_t> chunk_;
};

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct Row {
  std::string name;
  std::string unit;
  std::vector<double> uring, poll;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `calls` calls of `type` on each of `threads` clients; returns total
// calls per second. `lat` (if set, 1 thread) receives per-call latencies.
double Run(const std::string& addr, std::shared_ptr<const ClusterKey> key,
           uint16_t type, size_t bulk_len, int threads, int calls,
           std::vector<double>* lat, std::atomic<int>* errors) {
  std::vector<uint8_t> payload(16, 1), bulk(bulk_len, 7);
  std::vector<std::thread> ts;
  std::atomic<bool> go{false};
  std::vector<std::unique_ptr<RpcClient>> clients;
  for (int t = 0; t < threads; ++t) {
    clients.push_back(std::make_unique<RpcClient>(addr, key));
    (void)clients.back()->Call(kSmall, payload);  // connect outside timing
  }
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < calls; ++i) {
        auto t0 = Clock::now();
        auto r = clients[t]->Call(type, payload, bulk);
        if (lat) lat->push_back(Seconds(Clock::now() - t0) * 1e6);
        if (!r.ok()) ++*errors;
      }
    });
  }
  auto start = Clock::now();
  go = true;
  for (auto& th : ts) th.join();
  return threads * calls / Seconds(Clock::now() - start);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  bool quick = false;
  std::string only;  // "uring" or "poll": run one loop only (profiling)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rounds N] [--quick] [--only uring|poll]\n",
                   argv[0]);
      return 2;
    }
  }
  if (quick) rounds = 1;
  const int small_calls = quick ? 500 : 4000;
  const int big_calls = quick ? 20 : 200;

  std::array<uint8_t, kClusterKeySize> kb;
  kb.fill(9);
  auto key = ClusterKey::FromBytes(kb);
  NullHandler handler;

  std::vector<Row> rows = {
      {"small call latency, median (1 client)", "us", {}, {}},
      {"small call latency, p99 (1 client)", "us", {}, {}},
      {"small calls/s (1 client)", "calls/s", {}, {}},
      {"small calls/s (8 clients)", "calls/s", {}, {}},
      {"1 MiB request bulk (1 client)", "MiB/s", {}, {}},
      {"1 MiB request bulk (4 clients)", "MiB/s", {}, {}},
      {"1 MiB reply bulk (1 client)", "MiB/s", {}, {}},
      {"1 MiB reply bulk (4 clients)", "MiB/s", {}, {}},
  };
  std::atomic<int> errors{0};
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      bool uring = (round + k) % 2 == 0;
      if (!only.empty() && only != (uring ? "uring" : "poll")) continue;
      RpcServerOptions o;
      o.use_io_uring = uring;
      o.log_name = uring ? "bench-uring" : "bench-poll";
      o.log_rejects = true;
      auto s = RpcServer::Start(o, key, &handler);
      if (!s.ok()) {
        std::fprintf(stderr, "server: %s\n", s.status().ToString().c_str());
        return 1;
      }
      if (uring && !(*s)->using_io_uring()) {
        std::fprintf(stderr, "io_uring unavailable: nothing to compare\n");
        return 1;
      }
      const std::string& a = (*s)->address();
      std::vector<double> lat;
      lat.reserve(small_calls);
      double v[8];
      v[2] = Run(a, key, kSmall, 0, 1, small_calls, &lat, &errors);
      std::sort(lat.begin(), lat.end());
      v[0] = lat[lat.size() / 2];
      v[1] = lat[lat.size() * 99 / 100];
      v[3] = Run(a, key, kSmall, 0, 8, small_calls / 2, nullptr, &errors);
      v[4] = Run(a, key, kWrite, kMiB, 1, big_calls, nullptr, &errors);
      v[5] = Run(a, key, kWrite, kMiB, 4, big_calls / 2, nullptr, &errors);
      v[6] = Run(a, key, kRead, 0, 1, big_calls, nullptr, &errors);
      v[7] = Run(a, key, kRead, 0, 4, big_calls / 2, nullptr, &errors);
      for (int i = 0; i < 8; ++i)
        (uring ? rows[i].uring : rows[i].poll).push_back(v[i]);
      (*s)->Stop();
      std::fprintf(stderr, "round %d/%d %s done\n", round + 1, rounds,
                   uring ? "uring" : "poll");
    }
  }
  if (errors.load() != 0) {
    std::fprintf(stderr, "%d calls failed\n", errors.load());
    return 1;
  }
  std::printf("| row (median of %d rounds) | io_uring | poll | uring/poll |\n",
              rounds);
  std::printf("|---|---:|---:|---:|\n");
  for (auto& r : rows) {
    double u = Median(r.uring), p = Median(r.poll);
    std::printf("| %s, %s | %.1f | %.1f | %.2f |\n", r.name.c_str(),
                r.unit.c_str(), u, p, p > 0 ? u / p : 0.0);
  }
  return 0;
}

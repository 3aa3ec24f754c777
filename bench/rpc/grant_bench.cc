// grant_bench: what chunk grants (chunk_grant.h) cost chunkd per request.
//
// Rows, side by side in one run:
//   check alone: chunkd's part of one granted request on one core, the
//     GrantedCall decode plus one GrantKey::Verify (HMAC-SHA256 over ~160
//     bytes), repeated;
//   end to end: RemoteChunkService -> RpcServer (io_uring) ->
//     ChunkServiceServer over a store that keeps nothing, 4 KiB WriteChunk
//     and 4 KiB ReadChunk, once from the server identity (no grant) and
//     once from a client identity whose chunkd requires grants (one grant
//     per request, from a cache); CPU is the whole process (both ends).
//
//   grant_bench [--rounds N] [--quick]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/chunk_service_server.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/wire_messages.h"
#include "bench/support/process_sampling.h"

using namespace stripefs;
using namespace stripefs::rpc;
using stripefs::bench::CpuSeconds;
using stripefs::bench::LoadAvg;

namespace {

// Stores nothing; reads return zeros.
class NullChunks final : public ChunkService {
 public:
  Status WriteChunk(const ChunkId&, uint64_t,
                    std::span<const uint8_t>) override {
    return Status::Ok();
  }
  Result<std::vector<uint8_t>> ReadChunk(const ChunkId&, uint64_t, uint32_t,
                                         uint32_t length) override {
    return std::vector<uint8_t>(length);
  }
  Status ReadChunkInto(const ChunkId&, uint64_t, uint32_t,
                       std::span<uint8_t> out) override {
    std::fill(out.begin(), out.end(), 0);
    return Status::Ok();
  }
  Status DeleteChunk(const ChunkId&, uint64_t) override { return Status::Ok(); }
  Result<std::vector<ChunkInfo>> ListChunks(const ChunkInfo&,
                                            uint32_t) override {
    return std::vector<ChunkInfo>();
  }
  Result<ChunkStoreStats> Stats() override { return ChunkStoreStats{}; }
};

class OneGrant final : public ChunkGrantSource {
 public:
  explicit OneGrant(EncodedGrant g) : g_(g) {}
  Result<EncodedGrant> Get(uint64_t, uint8_t) override { return g_; }
  void Invalidate(uint64_t) override {}

 private:
  EncodedGrant g_;
};

struct Sample {
  double calls_per_s, cpu_us_per_call;
};

template <typename F>
Sample Run(F call, int calls) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = CpuSeconds();
  for (int i = 0; i < calls; ++i) {
    Status st = call(i);
    if (!st.ok()) {
      std::fprintf(stderr, "call failed: %s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return {calls / secs, (CpuSeconds() - cpu0) * 1e6 / calls};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5, calls = 5000, checks = 200000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--quick")) {
      rounds = 1;
      calls = 1000;
      checks = 20000;
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  std::printf("loadavg at start: %s\n", LoadAvg().c_str());
  std::array<uint8_t, kClusterKeySize> kb;
  kb.fill(9);
  auto server_key = ClusterKey::FromBytes(kb);
  VolumeId volume{};
  volume.fill(7);
  auto gk = GrantKey::Derive(*server_key, volume);
  auto alice = server_key->NewIdentity("client.alice");
  if (!gk.ok() || !alice.ok()) return 1;
  auto alice_key = std::make_shared<const ClusterKey>(*alice);
  const Caller who{Principal::kClient, "client.alice", alice->salt()};
  ChunkGrant g;
  g.ops = kGrantAllOps;
  g.inode = 5;
  g.issued_ms = UnixMillis();
  g.expires_ms = g.issued_ms + 3600'000;
  gk->Sign(&g, who);
  const EncodedGrant one[] = {EncodeGrant(g)};

  // The check alone.
  std::vector<uint8_t> payload =
      EncodeGrantedHead(static_cast<uint16_t>(MsgType::kWriteChunk), one);
  payload.resize(payload.size() + 28);  // a WriteChunk request's fields
  std::vector<double> check_us;
  for (int r = 0; r < rounds; ++r) {
    const double cpu0 = CpuSeconds();
    int good = 0;
    for (int i = 0; i < checks; ++i) {
      GrantedCall call;
      good +=
          DecodeGrantedCall(payload, &call) && gk->Verify(call.grants[0], who);
    }
    if (good != checks) return 1;
    check_us.push_back((CpuSeconds() - cpu0) * 1e6 / checks);
  }

  NullChunks store;
  ChunkServiceServer handler(&store);
  handler.RequireGrants(*gk);
  RpcServerOptions so;
  so.log_name = "grant-bench";
  so.binding = {ServerRole::kChunkd, 1, volume};
  auto server = RpcServer::Start(so, server_key, &handler);
  if (!server.ok()) return 1;
  OneGrant grants(one[0]);
  RemoteChunkService bare((*server)->address(), server_key);
  RemoteChunkService granted((*server)->address(), alice_key,
                             RemoteChunkService::DefaultOptions(), {}, &grants);
  const std::vector<uint8_t> data(4096, 1);
  std::vector<uint8_t> out(4096);
  // [write, read][server, client]
  std::vector<double> rate[2][2], cpu[2][2];
  for (int r = 0; r < rounds; ++r) {
    for (int j = 0; j < 2; ++j) {
      const int k = (r + j) % 2;  // rotate which goes first
      RemoteChunkService& stub = k ? granted : bare;
      Sample w = Run(
          [&](int i) {
            return stub.WriteChunk({5, uint64_t(i), 0}, 1, data);
          },
          calls);
      Sample rd = Run(
          [&](int i) {
            return stub.ReadChunkInto({5, uint64_t(i), 0}, 1, 0, out);
          },
          calls);
      rate[0][k].push_back(w.calls_per_s);
      cpu[0][k].push_back(w.cpu_us_per_call);
      rate[1][k].push_back(rd.calls_per_s);
      cpu[1][k].push_back(rd.cpu_us_per_call);
    }
    std::fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
  }
  (*server)->Stop();
  const auto c = handler.grant_counters();
  std::printf(
      "\n| chunk grants (median of %d rounds) | calls/s | CPU-us per "
      "call |\n|---|---:|---:|\n",
      rounds);
  std::printf(
      "| check alone: GrantedCall decode + 1 HMAC verify (one core) "
      "| - | %.2f |\n",
      Median(check_us));
  const char* ops[] = {"4 KiB WriteChunk", "4 KiB ReadChunk"};
  for (int o = 0; o < 2; ++o) {
    std::printf("| %s, server identity (no grant) | %.0f | %.1f |\n", ops[o],
                Median(rate[o][0]), Median(cpu[o][0]));
    std::printf("| %s, client identity (1 grant checked) | %.0f | %.1f |\n",
                ops[o], Median(rate[o][1]), Median(cpu[o][1]));
  }
  for (int o = 0; o < 2; ++o) {
    const double b = Median(cpu[o][0]);
    std::printf("ratio=%.3f cpu_per_call granted/bare (%s)\n",
                b > 0 ? Median(cpu[o][1]) / b : 0, ops[o]);
  }
  std::printf("grants verified %llu, refused %llu\n",
              static_cast<unsigned long long>(c.verified),
              static_cast<unsigned long long>(c.refused));
  std::printf("loadavg at end: %s\n", LoadAvg().c_str());
  return c.refused == 0 ? 0 : 1;
}

#include "backend/client/repairer.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/client/placement.h"

namespace stripefs {

namespace {

// Placement as if no server were out: where chunks were put before servers
// were marked out. A stripe whose placement differs has chunks to move.
Result<Placement> PlacementIgnoringOut(const ClusterMap& map, uint32_t n) {
  ClusterMap all = map;
  for (auto& s : all.servers)
    if (s.state == ServerState::kOut) s.state = ServerState::kUp;
  return Placement::Create(all, n);
}

}  // namespace

Result<RepairProgress> Repairer::Run(
    const RepairOptions& options,
    const std::function<void(const RepairProgress&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  MetaService& meta = volume_->meta();
  StripeClient& client = volume_->client();
  STRIPEFS_RETURN_IF_ERROR(client.RefreshClusterMap());
  auto map = meta.GetClusterMap();
  if (!map.ok()) return map.status();
  const Geometry g = volume_->geometry();
  const uint32_t n = g.k + g.m;
  auto now_placement = Placement::Create(*map, n);
  if (!now_placement.ok()) return now_placement.status();
  auto old_placement = PlacementIgnoringOut(*map, n);
  if (!old_placement.ok()) return old_placement.status();

  // First pass: collect the stripes to visit (the map is small per stripe).
  std::vector<StripeRef> work;
  uint64_t after_ino = 0, after_stripe = 0;
  for (;;) {
    auto batch = meta.ListStripes(after_ino, after_stripe, 4096);
    if (!batch.ok()) return batch.status().Annotate("listing stripes");
    if (batch->empty()) break;
    for (const auto& ref : *batch) {
      bool moved = old_placement->ServersFor(ref.inode, ref.sv.stripe) !=
                   now_placement->ServersFor(ref.inode, ref.sv.stripe);
      if (options.scrub || ref.sv.missing_mask != 0 || moved)
        work.push_back(ref);
    }
    after_ino = batch->back().inode;
    after_stripe = batch->back().sv.stripe;
  }

  RepairProgress p;
  p.stripes_total = work.size();
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto report = [&] {
    p.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (progress) progress(p);
  };
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= work.size()) return;
      const StripeRef& ref = work[i];
      auto r = client.RepairStripe(ref.inode, ref.sv, options.scrub);
      std::lock_guard<std::mutex> lock(mu);
      ++p.stripes_seen;
      if (r.ok()) {
        if (*r > 0) ++p.stripes_repaired;
        p.chunks_rebuilt += *r;
        p.bytes_rebuilt += uint64_t{*r} * ref.sv.chunk_len;
      } else if (r.status().code() != ESTALE) {
        ++p.stripes_failed;
        if (p.first_error.empty())
          p.first_error = "inode " + std::to_string(ref.inode) + " stripe " +
                          std::to_string(ref.sv.stripe) + ": " +
                          r.status().ToString();
      }
      report();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, options.parallel); ++t)
    threads.emplace_back(worker);
  for (auto& t : threads) t.join();

  if (options.scrub) STRIPEFS_RETURN_IF_ERROR(CountOrphans(options, &p));
  report();
  return p;
}

Status Repairer::CountOrphans(const RepairOptions& options, RepairProgress* p) {
  MetaService& meta = volume_->meta();
  auto map = meta.GetClusterMap();
  if (!map.ok()) return map.status();
  const Geometry g = volume_->geometry();
  auto placement = Placement::Create(*map, g.k + g.m);
  if (!placement.ok()) return placement.status();
  for (const auto& server : map->servers) {
    if (server.state != ServerState::kUp) continue;
    ChunkService* svc = volume_->servers().Get(server);
    if (svc == nullptr) continue;
    ChunkInfo after;
    for (;;) {
      auto chunks = svc->ListChunks(after, 1024);
      if (!chunks.ok() || chunks->empty()) break;
      for (const auto& c : *chunks) {
        auto committed = meta.GetStripes(c.id.inode, c.id.stripe, 1);
        // Live: the committed version, on the server placement names for
        // its index (a copy left behind by a move is garbage).
        bool live =
            committed.ok() && !committed->empty() &&
            committed->front().version == c.version && c.id.index < g.k + g.m &&
            placement->ServersFor(c.id.inode, c.id.stripe)[c.id.index] ==
                server.id;
        if (live || !committed.ok()) continue;
        ++p->orphan_chunks;
        if (options.delete_orphans &&
            svc->DeleteChunkVersion(c.id, c.version).ok())
          ++p->orphans_deleted;
      }
      after = chunks->back();
    }
  }
  return Status::Ok();
}

}  // namespace stripefs

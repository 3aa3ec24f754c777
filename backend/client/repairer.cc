#include "backend/client/repairer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/client/placement.h"
#include "backend/client/stripe_geometry.h"

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

// "chunk 2 (server 5), chunk 4 (server 1) not rewritten: server down or not
// answering" for the chunks in `mask` of `ref`.
std::string UnreachableChunks(const Placement& placement, const StripeRef& ref,
                              uint32_t mask) {
  const std::vector<uint32_t> ids =
      placement.ServersFor(ref.inode, ref.sv.stripe);
  std::string out;
  for (uint32_t i = 0; i < ids.size() && i < 32; ++i) {
    if (!(mask & ChunkBit(i))) continue;
    out += (out.empty() ? "chunk " : ", chunk ") + std::to_string(i) +
           " (server " + std::to_string(ids[i]) + ")";
  }
  return out + " not rewritten: server down or not answering";
}

}  // namespace

Result<uint32_t> RepairStripe(StripeClient& client, uint64_t ino,
                              const StripeVersion& sv, bool verify,
                              uint32_t* unreachable_out) {
  if (unreachable_out) *unreachable_out = 0;
  const Geometry& geometry = client.geometry();
  const ec::Codec& codec = client.codec();
  ClientCounters& counters = client.mutable_counters();
  auto Bit = [](int i) { return ChunkBit(static_cast<uint32_t>(i)); };
  const int k = static_cast<int>(geometry.k);
  const int n = k + static_cast<int>(geometry.m);
  const uint32_t len = sv.chunk_len;
  std::lock_guard<std::mutex> stripe_lock(client.locks().For(ino, sv.stripe));
  const ChunkLayout layout = client.view().LayoutFor(ino, sv.stripe);

  // Read every chunk whole; the stores verify CRCs.
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(n));
  std::vector<Status> errs(static_cast<size_t>(n));
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < n; ++i) {
    tasks.push_back([&, i] {
      const size_t u = static_cast<size_t>(i);
      ChunkService* svc = layout.Usable(u, &errs[u]);
      if (svc == nullptr) return;
      auto r = svc->ReadChunk({ino, sv.stripe, static_cast<uint32_t>(i)},
                              sv.version, 0, len);
      if (r.ok()) {
        bufs[u] = std::move(r).value();
      } else {
        errs[u] = r.status();
      }
    });
  }
  client.fanout().pool().RunAll(std::move(tasks));

  uint32_t bad = 0, unreachable = 0;
  for (int i = 0; i < n; ++i) {
    const size_t u = static_cast<size_t>(i);
    if (errs[u].ok()) continue;
    if (errs[u].code() == EBADMSG) ClientCounters::Add(counters.crc_errors);
    if (!layout.IsUp(u) || errs[u].code() == EHOSTDOWN) {
      unreachable |= Bit(i);  // cannot rewrite there now
    } else {
      bad |= Bit(i);
    }
  }
  const int readable = n - __builtin_popcount(bad | unreachable);
  if (readable < k) {
    return Status::IoError("stripe " + std::to_string(sv.stripe) +
                           " of inode " + std::to_string(ino) + ": only " +
                           std::to_string(readable) + " chunks readable, " +
                           std::to_string(k) + " needed to repair");
  }

  // Rebuilds `erase` into fresh buffers from the readable chunks.
  auto rebuild = [&](uint32_t erase, uint32_t exclude,
                     std::vector<std::vector<uint8_t>>* out) -> Status {
    *out = bufs;
    std::vector<uint8_t*> ptrs(static_cast<size_t>(n), nullptr);
    std::vector<int> erased, unavailable;
    for (int i = 0; i < n; ++i) {
      const size_t u = static_cast<size_t>(i);
      if (erase & Bit(i)) {
        (*out)[u].assign(len, 0);
        erased.push_back(i);
      } else if (exclude & Bit(i)) {
        unavailable.push_back(i);
        continue;
      }
      ptrs[u] = (*out)[u].data();
    }
    if (erased.empty()) return Status::Ok();
    return codec.Reconstruct(ptrs, erased, len, unavailable);
  };
  // True when the parity of `c` matches its data.
  auto consistent = [&](const std::vector<std::vector<uint8_t>>& c) {
    std::vector<const uint8_t*> d;
    std::vector<std::vector<uint8_t>> parity(static_cast<size_t>(n - k),
                                             std::vector<uint8_t>(len));
    std::vector<uint8_t*> p;
    for (int i = 0; i < k; ++i) d.push_back(c[static_cast<size_t>(i)].data());
    for (auto& v : parity) p.push_back(v.data());
    if (!codec.Encode(d, p, len).ok()) return false;
    for (int i = k; i < n; ++i)
      if (parity[static_cast<size_t>(i - k)] != c[static_cast<size_t>(i)])
        return false;
    return true;
  };

  std::vector<std::vector<uint8_t>> fixed;
  STRIPEFS_RETURN_IF_ERROR(rebuild(bad, unreachable, &fixed));
  if (verify && unreachable == 0 && !consistent(fixed)) {
    // CRCs passed but parity disagrees: find the one chunk whose rebuild
    // makes the stripe consistent again.
    uint32_t culprit = 0;
    for (int i = 0; i < n && culprit == 0; ++i) {
      if (bad & Bit(i)) continue;
      std::vector<std::vector<uint8_t>> trial;
      if (rebuild(bad | Bit(i), 0, &trial).ok() && consistent(trial)) {
        culprit = Bit(i);
        fixed = std::move(trial);
      }
    }
    if (culprit == 0) {
      return Status::Corruption("stripe " + std::to_string(sv.stripe) +
                                " of inode " + std::to_string(ino) +
                                ": parity inconsistent and no single chunk "
                                "explains it");
    }
    bad |= culprit;
  }

  uint32_t rewritten = 0;
  Status write_error;
  std::vector<std::pair<int, std::span<const uint8_t>>> to_write;
  for (int i = 0; i < n; ++i)
    if (bad & Bit(i)) to_write.emplace_back(i, fixed[static_cast<size_t>(i)]);
  uint32_t failed = 0;
  if (!to_write.empty()) {
    failed = client.fanout().WriteChunks(ino, sv.stripe, sv.version, layout,
                                         to_write, &write_error);
    rewritten = static_cast<uint32_t>(to_write.size()) -
                static_cast<uint32_t>(__builtin_popcount(failed));
  }
  const uint32_t still_missing = failed | unreachable;
  if (still_missing != sv.missing_mask) {
    Status st = client.meta().SetStripeMissing(ino, sv.stripe, sv.version,
                                               still_missing);
    client.ForgetStripeMap(ino);  // the cached missing mask is out of date
    if (!st.ok() && st.code() != ESTALE) return st;
  }
  if (failed != 0) return write_error.Annotate("repair write");
  if (unreachable_out) *unreachable_out = unreachable;
  return rewritten;
}

Result<RepairProgress> Repairer::Run(
    const RepairOptions& options,
    const std::function<void(const RepairProgress&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  MetaService& meta = volume_->meta();
  StripeClient& client = volume_->client();
  STRIPEFS_RETURN_IF_ERROR(client.RefreshClusterMap());
  // Deletions still queued would otherwise be counted as orphans.
  client.DrainGarbage();
  auto map = meta.GetClusterMap();
  if (!map.ok()) return map.status();
  const Geometry g = volume_->geometry();
  const uint32_t n = g.k + g.m;
  auto now_placement = Placement::Create(*map, n);
  if (!now_placement.ok()) return now_placement.status();
  auto old_placement = PlacementIgnoringOut(*map, n);
  if (!old_placement.ok()) return old_placement.status();

  // Servers that are down (not out): placement still names them, so their
  // chunks are degraded until they are back (or marked out and repaired).
  std::set<uint32_t> down;
  for (const auto& s : map->servers)
    if (s.state == ServerState::kDown) down.insert(s.id);

  // First pass: collect the stripes to visit (the map is small per stripe).
  struct Work {
    StripeRef ref;
    // Chunks on servers that are down. A stripe visited only for these
    // (nothing missing or moved, no scrub) is counted, not touched: its
    // chunks are intact there and nothing can be rebuilt onto a down server.
    uint32_t on_down = 0;
    bool rebuild = true;
  };
  std::vector<Work> work;
  uint64_t after_ino = 0, after_stripe = 0;
  for (;;) {
    auto batch = meta.ListStripes(after_ino, after_stripe, 4096);
    if (!batch.ok()) return batch.status().Annotate("listing stripes");
    if (batch->empty()) break;
    for (const auto& ref : *batch) {
      const std::vector<uint32_t> now =
          now_placement->ServersFor(ref.inode, ref.sv.stripe);
      const bool moved =
          old_placement->ServersFor(ref.inode, ref.sv.stripe) != now;
      uint32_t on_down = 0;
      for (uint32_t i = 0; i < now.size() && i < 32; ++i)
        if (down.count(now[i])) on_down |= ChunkBit(i);
      const bool rebuild = options.scrub || ref.sv.missing_mask != 0 || moved;
      if (rebuild || on_down != 0) work.push_back({ref, on_down, rebuild});
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
      const StripeRef& ref = work[i].ref;
      uint32_t unreachable = work[i].on_down;
      Result<uint32_t> r = uint32_t{0};
      if (work[i].rebuild)
        r = RepairStripe(client, ref.inode, ref.sv, options.scrub,
                         &unreachable);
      std::lock_guard<std::mutex> lock(mu);
      ++p.stripes_seen;
      auto fail = [&](const std::string& why) {
        ++p.stripes_failed;
        if (p.first_error.empty())
          p.first_error = "inode " + std::to_string(ref.inode) + " stripe " +
                          std::to_string(ref.sv.stripe) + ": " + why;
      };
      if (r.ok()) {
        if (*r > 0) ++p.stripes_repaired;
        p.chunks_rebuilt += *r;
        p.bytes_rebuilt += uint64_t{*r} * ref.sv.chunk_len;
        if (unreachable != 0) {
          ++p.stripes_unreachable;
          fail("still degraded: " +
               UnreachableChunks(*now_placement, ref, unreachable));
        }
      } else if (r.status().code() != ESTALE) {
        fail(r.status().ToString());
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

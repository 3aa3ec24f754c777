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

// One stripe's repair, in the order RepairStripe runs its steps. Holds
// the stripe's chunks whole (k+m chunk_len buffers) for the duration.
class StripeRepair {
 public:
  StripeRepair(StripeClient& client, uint64_t ino, const StripeVersion& sv)
      : client_(client),
        codec_(client.codec()),
        ino_(ino),
        sv_(sv),
        k_(static_cast<int>(client.geometry().k)),
        n_(k_ + static_cast<int>(client.geometry().m)),
        len_(sv.chunk_len),
        layout_(client.view().LayoutFor(ino, sv.stripe)),
        bufs_(static_cast<size_t>(n_)),
        errs_(static_cast<size_t>(n_)) {}

  // Reads every chunk whole (the stores verify CRCs) and sorts the
  // failures: `bad` chunks are rewritten, `unreachable` ones (server down
  // or not answering) cannot be now. EIO when fewer than k are readable.
  Status ReadAndClassify();
  // Rebuilds the bad chunks. With verify (scrub, every chunk reachable),
  // a chunk that passed its CRC but disagrees with parity is found and
  // counted bad too; Corruption when no single chunk explains it.
  Status Rebuild(bool verify);
  // Writes the rebuilt chunks back and stores the stripe's new missing
  // mask (chunks that failed or are unreachable). Returns how many chunks
  // were rewritten.
  Result<uint32_t> WriteBack();

  uint32_t unreachable() const { return unreachable_; }

 private:
  static uint32_t Bit(int i) { return ChunkBit(static_cast<uint32_t>(i)); }
  // Rebuilds `erase` into fresh buffers from the readable chunks, not
  // using those in `exclude`.
  Status Reconstruct(uint32_t erase, uint32_t exclude,
                     std::vector<std::vector<uint8_t>>* out) const;
  // True when the parity of `c` matches its data.
  bool Consistent(const std::vector<std::vector<uint8_t>>& c) const;
  std::string Name() const {
    return "stripe " + std::to_string(sv_.stripe) + " of inode " +
           std::to_string(ino_);
  }

  StripeClient& client_;
  const ec::Codec& codec_;
  const uint64_t ino_;
  const StripeVersion& sv_;
  const int k_, n_;
  const uint32_t len_;
  const ChunkLayout layout_;
  std::vector<std::vector<uint8_t>> bufs_;   // as read
  std::vector<Status> errs_;                 // per chunk read
  std::vector<std::vector<uint8_t>> fixed_;  // bufs_ with bad_ rebuilt
  uint32_t bad_ = 0, unreachable_ = 0;
};

Status StripeRepair::ReadAndClassify() {
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < n_; ++i) {
    tasks.push_back([this, i] {
      const size_t u = static_cast<size_t>(i);
      ChunkService* svc = layout_.Usable(u, &errs_[u]);
      if (svc == nullptr) return;
      auto r = svc->ReadChunk({ino_, sv_.stripe, static_cast<uint32_t>(i)},
                              sv_.version, 0, len_);
      if (r.ok()) {
        bufs_[u] = std::move(r).value();
      } else {
        errs_[u] = r.status();
      }
    });
  }
  client_.fanout().pool().RunAll(std::move(tasks));

  ClientCounters& counters = client_.mutable_counters();
  for (int i = 0; i < n_; ++i) {
    const size_t u = static_cast<size_t>(i);
    if (errs_[u].ok()) continue;
    if (errs_[u].code() == EBADMSG) ClientCounters::Add(counters.crc_errors);
    if (!layout_.IsUp(u) || errs_[u].code() == EHOSTDOWN) {
      unreachable_ |= Bit(i);  // cannot rewrite there now
    } else {
      bad_ |= Bit(i);
    }
  }
  const int readable = n_ - __builtin_popcount(bad_ | unreachable_);
  if (readable < k_) {
    return Status::IoError(Name() + ": only " + std::to_string(readable) +
                           " chunks readable, " + std::to_string(k_) +
                           " needed to repair");
  }
  return Status::Ok();
}

Status StripeRepair::Reconstruct(uint32_t erase, uint32_t exclude,
                                 std::vector<std::vector<uint8_t>>* out) const {
  *out = bufs_;
  std::vector<uint8_t*> ptrs(static_cast<size_t>(n_), nullptr);
  std::vector<int> erased, unavailable;
  for (int i = 0; i < n_; ++i) {
    const size_t u = static_cast<size_t>(i);
    if (erase & Bit(i)) {
      (*out)[u].assign(len_, 0);
      erased.push_back(i);
    } else if (exclude & Bit(i)) {
      unavailable.push_back(i);
      continue;
    }
    ptrs[u] = (*out)[u].data();
  }
  if (erased.empty()) return Status::Ok();
  return codec_.Reconstruct(ptrs, erased, len_, unavailable);
}

bool StripeRepair::Consistent(
    const std::vector<std::vector<uint8_t>>& c) const {
  std::vector<const uint8_t*> d;
  std::vector<std::vector<uint8_t>> parity(static_cast<size_t>(n_ - k_),
                                           std::vector<uint8_t>(len_));
  std::vector<uint8_t*> p;
  for (int i = 0; i < k_; ++i) d.push_back(c[static_cast<size_t>(i)].data());
  for (auto& v : parity) p.push_back(v.data());
  if (!codec_.Encode(d, p, len_).ok()) return false;
  for (int i = k_; i < n_; ++i)
    if (parity[static_cast<size_t>(i - k_)] != c[static_cast<size_t>(i)])
      return false;
  return true;
}

Status StripeRepair::Rebuild(bool verify) {
  STRIPEFS_RETURN_IF_ERROR(Reconstruct(bad_, unreachable_, &fixed_));
  if (!verify || unreachable_ != 0 || Consistent(fixed_)) return Status::Ok();
  // CRCs passed but parity disagrees: find the one chunk whose rebuild
  // makes the stripe consistent again.
  for (int i = 0; i < n_; ++i) {
    if (bad_ & Bit(i)) continue;
    std::vector<std::vector<uint8_t>> trial;
    if (Reconstruct(bad_ | Bit(i), 0, &trial).ok() && Consistent(trial)) {
      bad_ |= Bit(i);
      fixed_ = std::move(trial);
      return Status::Ok();
    }
  }
  return Status::Corruption(Name() +
                            ": parity inconsistent and no single chunk "
                            "explains it");
}

Result<uint32_t> StripeRepair::WriteBack() {
  uint32_t rewritten = 0;
  Status write_error;
  std::vector<std::pair<int, std::span<const uint8_t>>> to_write;
  for (int i = 0; i < n_; ++i)
    if (bad_ & Bit(i)) to_write.emplace_back(i, fixed_[static_cast<size_t>(i)]);
  uint32_t failed = 0;
  if (!to_write.empty()) {
    failed = client_.fanout().WriteChunks(ino_, sv_.stripe, sv_.version,
                                          layout_, to_write, &write_error);
    rewritten = static_cast<uint32_t>(to_write.size()) -
                static_cast<uint32_t>(__builtin_popcount(failed));
  }
  const uint32_t still_missing = failed | unreachable_;
  if (still_missing != sv_.missing_mask) {
    Status st = client_.meta().SetStripeMissing(ino_, sv_.stripe, sv_.version,
                                                still_missing);
    client_.ForgetStripeMap(ino_);  // the cached missing mask is out of date
    if (!st.ok() && st.code() != ESTALE) return st;
  }
  if (failed != 0) return write_error.Annotate("repair write");
  return rewritten;
}

}  // namespace

Result<uint32_t> RepairStripe(StripeClient& client, uint64_t ino,
                              const StripeVersion& sv, bool verify,
                              uint32_t* unreachable_out) {
  if (unreachable_out) *unreachable_out = 0;
  std::lock_guard<std::mutex> stripe_lock(client.locks().For(ino, sv.stripe));
  StripeRepair repair(client, ino, sv);
  STRIPEFS_RETURN_IF_ERROR(repair.ReadAndClassify());
  STRIPEFS_RETURN_IF_ERROR(repair.Rebuild(verify));
  STRIPEFS_ASSIGN_OR_RETURN(uint32_t rewritten, repair.WriteBack());
  if (unreachable_out) *unreachable_out = repair.unreachable();
  return rewritten;
}

namespace {

// A stripe Repairer::Run visits.
struct RepairWork {
  StripeRef ref;
  // Chunks on servers that are down. A stripe visited only for these
  // (nothing missing or moved, no scrub) is counted, not touched: its
  // chunks are intact there and nothing can be rebuilt onto a down server.
  uint32_t on_down = 0;
  bool rebuild = true;
};

// Lists the volume's stripes and keeps those to visit: with scrub every
// one; else those with missing chunks, chunks whose placement moved
// (`now` differs from `old`, the placement before servers were marked
// out), or chunks on servers that are `down`.
Result<std::vector<RepairWork>> CollectWork(MetaService& meta,
                                            const Placement& now_placement,
                                            const Placement& old_placement,
                                            const std::set<uint32_t>& down,
                                            bool scrub) {
  std::vector<RepairWork> work;
  uint64_t after_ino = 0, after_stripe = 0;
  for (;;) {
    auto batch = meta.ListStripes(after_ino, after_stripe, 4096);
    if (!batch.ok()) return batch.status().Annotate("listing stripes");
    if (batch->empty()) break;
    for (const auto& ref : *batch) {
      const std::vector<uint32_t> now =
          now_placement.ServersFor(ref.inode, ref.sv.stripe);
      const bool moved =
          old_placement.ServersFor(ref.inode, ref.sv.stripe) != now;
      uint32_t on_down = 0;
      for (uint32_t i = 0; i < now.size() && i < 32; ++i)
        if (down.count(now[i])) on_down |= ChunkBit(i);
      const bool rebuild = scrub || ref.sv.missing_mask != 0 || moved;
      if (rebuild || on_down != 0) work.push_back({ref, on_down, rebuild});
    }
    after_ino = batch->back().inode;
    after_stripe = batch->back().sv.stripe;
  }
  return work;
}

// Adds the outcome of one stripe (`r`: chunks rewritten; `unreachable`:
// chunks left on servers down or not answering) to `p`.
void Tally(const StripeRef& ref, const Result<uint32_t>& r,
           uint32_t unreachable, const Placement& placement,
           RepairProgress* p) {
  ++p->stripes_seen;
  auto fail = [&](const std::string& why) {
    ++p->stripes_failed;
    if (p->first_error.empty())
      p->first_error = "inode " + std::to_string(ref.inode) + " stripe " +
                       std::to_string(ref.sv.stripe) + ": " + why;
  };
  if (r.ok()) {
    if (*r > 0) ++p->stripes_repaired;
    p->chunks_rebuilt += *r;
    p->bytes_rebuilt += uint64_t{*r} * ref.sv.chunk_len;
    if (unreachable != 0) {
      ++p->stripes_unreachable;
      fail("still degraded: " + UnreachableChunks(placement, ref, unreachable));
    }
  } else if (r.status().code() != ESTALE) {
    fail(r.status().ToString());
  }
}

}  // namespace

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
  STRIPEFS_ASSIGN_OR_RETURN(
      std::vector<RepairWork> work,
      CollectWork(meta, *now_placement, *old_placement, down, options.scrub));

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
      Tally(ref, r, unreachable, *now_placement, &p);
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

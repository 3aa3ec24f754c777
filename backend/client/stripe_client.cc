#include "backend/client/stripe_client.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <string>

namespace stripefs {

// The servers of one stripe's chunks under the current cluster map.
struct StripeClient::Layout {
  std::vector<ServerInfo> servers;      // per chunk index
  std::vector<ChunkService*> services;  // null = unknown server

  // The service holding chunk index i, or null (and *why set) when its
  // server is down or unknown.
  ChunkService* Usable(size_t i, Status* why) const {
    if (services[i] != nullptr && servers[i].state == ServerState::kUp)
      return services[i];
    *why = Status::Unavailable("chunk server " + std::to_string(servers[i].id) +
                               (services[i] ? " is down" : " is unknown"));
    return nullptr;
  }
};

namespace {

bool IsDown(const ServerInfo& s) { return s.state != ServerState::kUp; }

uint32_t Bit(int i) { return 1u << i; }

// Prefer the error a user can act on: ENOSPC, then anything but EHOSTDOWN.
void KeepWorse(Status* kept, const Status& st) {
  if (st.ok()) return;
  if (kept->ok() || st.code() == ENOSPC ||
      (kept->code() == EHOSTDOWN && st.code() != ENOSPC)) {
    *kept = st;
  }
}

}  // namespace

Result<std::unique_ptr<StripeClient>> StripeClient::Create(
    MetaService* meta, ChunkServerSet* servers,
    const StripeClientOptions& options) {
  auto geometry = meta->GetGeometry();
  if (!geometry.ok()) return geometry.status().Annotate("reading geometry");
  auto codec = ec::Codec::Create(static_cast<int>(geometry->k),
                                 static_cast<int>(geometry->m));
  if (!codec.ok()) return codec.status();
  std::unique_ptr<StripeClient> client(new StripeClient(
      meta, servers, *geometry, std::move(codec).value(), options));
  STRIPEFS_RETURN_IF_ERROR(client->RefreshClusterMap());
  return client;
}

StripeClient::StripeClient(MetaService* meta, ChunkServerSet* servers,
                           Geometry geometry, std::unique_ptr<ec::Codec> codec,
                           const StripeClientOptions& options)
    : meta_(meta),
      servers_(servers),
      geometry_(geometry),
      codec_(std::move(codec)),
      options_(options),
      pool_(options.io_threads) {
  if (options_.map_refresh_interval.count() > 0)
    refresher_ = std::thread([this] { RefreshLoop(); });
}

StripeClient::~StripeClient() {
  {
    std::lock_guard<std::mutex> lock(refresh_mu_);
    refresh_stopping_ = true;
  }
  refresh_cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

Status StripeClient::RefreshClusterMap() {
  auto map = meta_->GetClusterMap();
  if (!map.ok()) return map.status().Annotate("reading cluster map");
  auto placement = Placement::Create(*map, geometry_.k + geometry_.m);
  if (!placement.ok()) return placement.status();
  std::lock_guard<std::mutex> lock(map_mu_);
  map_ = std::move(map).value();
  placement_ = std::make_shared<const Placement>(std::move(placement).value());
  return Status::Ok();
}

Result<bool> StripeClient::RefreshClusterMapIfChanged() {
  auto map = meta_->GetClusterMap();
  if (!map.ok()) return map.status().Annotate("reading cluster map");
  {
    std::lock_guard<std::mutex> lock(map_mu_);
    if (map->epoch == map_.epoch && map->servers == map_.servers) return false;
  }
  auto placement = Placement::Create(*map, geometry_.k + geometry_.m);
  if (!placement.ok()) return placement.status();
  std::lock_guard<std::mutex> lock(map_mu_);
  if (map->epoch < map_.epoch) return false;  // a newer one won the race
  map_ = std::move(map).value();
  placement_ = std::make_shared<const Placement>(std::move(placement).value());
  ClientCounters::Add(counters_.map_updates);
  return true;
}

uint64_t StripeClient::map_epoch() {
  std::lock_guard<std::mutex> lock(map_mu_);
  return map_.epoch;
}

bool StripeClient::IsSuspect(uint32_t server) {
  std::lock_guard<std::mutex> lock(suspect_mu_);
  auto it = suspect_until_.find(server);
  if (it == suspect_until_.end()) return false;
  if (std::chrono::steady_clock::now() < it->second) return true;
  suspect_until_.erase(it);
  return false;
}

void StripeClient::MarkSuspect(uint32_t server, bool suspect) {
  // Long enough for metad to mark a hung server down (3-4 s by default).
  constexpr auto kSuspectWindow = std::chrono::seconds(10);
  std::lock_guard<std::mutex> lock(suspect_mu_);
  if (suspect) {
    suspect_until_[server] = std::chrono::steady_clock::now() + kSuspectWindow;
  } else {
    suspect_until_.erase(server);
  }
}

void StripeClient::RequestMapRefresh() {
  if (!refresher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(refresh_mu_);
    refresh_requested_ = true;
  }
  refresh_cv_.notify_all();
}

void StripeClient::RefreshLoop() {
  // Requested refreshes are at most this often (a dead server makes every
  // call request one until the map says it is down).
  constexpr auto kMinGap = std::chrono::milliseconds(100);
  std::unique_lock<std::mutex> lock(refresh_mu_);
  while (!refresh_stopping_) {
    refresh_cv_.wait_for(lock, options_.map_refresh_interval, [&] {
      return refresh_stopping_ || refresh_requested_;
    });
    if (refresh_stopping_) break;
    refresh_requested_ = false;
    lock.unlock();
    // Failure (metad unreachable) keeps the current map; calls go on.
    (void)RefreshClusterMapIfChanged();
    lock.lock();
    refresh_cv_.wait_for(lock, kMinGap, [&] { return refresh_stopping_; });
  }
}

StripeClient::Layout StripeClient::LayoutFor(uint64_t ino, uint64_t stripe) {
  std::shared_ptr<const Placement> placement;
  ClusterMap map;
  {
    std::lock_guard<std::mutex> lock(map_mu_);
    placement = placement_;
    map = map_;  // small; copied so Get() runs unlocked
  }
  Layout layout;
  for (uint32_t id : placement->ServersFor(ino, stripe)) {
    auto it = std::find_if(map.servers.begin(), map.servers.end(),
                           [&](const ServerInfo& s) { return s.id == id; });
    layout.servers.push_back(*it);
    layout.services.push_back(servers_->Get(*it));
  }
  return layout;
}

std::mutex& StripeClient::StripeLock(uint64_t ino, uint64_t stripe) {
  return stripe_locks_[PlacementHash(ino, stripe) % kStripeLocks];
}

Result<uint64_t> StripeClient::NextVersion() {
  std::lock_guard<std::mutex> lock(version_mu_);
  if (next_version_ == version_limit_) {
    auto first = meta_->AllocateVersions(options_.version_batch);
    if (!first.ok()) return first.status().Annotate("allocating versions");
    next_version_ = *first;
    version_limit_ = *first + options_.version_batch;
  }
  return next_version_++;
}

bool StripeClient::MovedOn(uint64_t ino, uint64_t stripe,
                           const StripeVersion& base) {
  bool exists = false;
  auto now = CurrentStripe(ino, stripe, &exists);
  if (!now.ok() || !exists || now->version == base.version) return false;
  ClientCounters::Add(counters_.commit_conflicts);
  return true;
}

Result<StripeVersion> StripeClient::CurrentStripe(uint64_t ino, uint64_t stripe,
                                                  bool* exists) {
  auto got = meta_->GetStripes(ino, stripe, 1);
  if (!got.ok()) return got.status();
  *exists = !got->empty();
  if (!*exists) {
    StripeVersion none;
    none.stripe = stripe;
    return none;
  }
  return got->front();
}

// --- reads -------------------------------------------------------------------

namespace {

// The chunk reads of one ReadColumns call, shared with the I/O tasks: a
// read abandoned past the deadline finishes into this (kept alive by the
// task's reference) after ReadColumns has returned.
struct ChunkReads {
  explicit ChunkReads(size_t n) : bufs(n), errs(n) {}
  std::mutex mu;
  std::condition_variable cv;
  uint32_t done = 0;                       // indices finished; guarded by mu
  std::vector<std::vector<uint8_t>> bufs;  // guarded by mu
  std::vector<Status> errs;                // guarded by mu
};

}  // namespace

Status StripeClient::ReadColumns(uint64_t ino, const StripeVersion& sv,
                                 const Layout& layout,
                                 const std::vector<int>& want, uint32_t lo,
                                 uint32_t hi,
                                 std::vector<std::vector<uint8_t>>* out) {
  using Clock = std::chrono::steady_clock;
  const int k = static_cast<int>(geometry_.k);
  const int n = k + static_cast<int>(geometry_.m);
  const uint32_t len = hi - lo;
  const auto deadline = options_.read_deadline;
  const bool use_deadline = deadline.count() > 0;
  auto reads = std::make_shared<ChunkReads>(static_cast<size_t>(n));
  std::vector<Status> errs(static_cast<size_t>(n));  // why a chunk failed
  uint32_t want_mask = 0;
  for (int i : want) want_mask |= Bit(i);
  uint32_t launched = 0;   // reads started
  uint32_t harvested = 0;  // reads finished and accounted for
  uint32_t have = 0;       // chunks read
  uint32_t failed = sv.missing_mask;
  uint32_t counted = 0;  // running reads not yet past their deadline
  uint32_t slow = 0;     // reads that passed the deadline
  bool transport_error = false;

  // Starts reading chunk i on the pool (or fails it at once when its server
  // is down or unknown).
  auto launch = [&](int i) {
    const size_t u = static_cast<size_t>(i);
    ChunkService* svc = layout.Usable(u, &errs[u]);
    if (svc == nullptr) {
      failed |= Bit(i);
      ClientCounters::Add(counters_.chunk_read_errors);
      return;
    }
    launched |= Bit(i);
    if (use_deadline && IsSuspect(layout.servers[u].id)) {
      // Recently slow or unreachable: ask, but read around it at once.
      ClientCounters::Add(counters_.hedged_chunk_reads);
    } else {
      counted |= Bit(i);
    }
    const ChunkId id{ino, sv.stripe, static_cast<uint32_t>(i)};
    const uint64_t version = sv.version;
    pool_.Submit([reads, svc, id, version, lo, len, i, u] {
      auto r = svc->ReadChunk(id, version, lo, len);
      std::lock_guard<std::mutex> lock(reads->mu);
      if (r.ok() && r->size() == len) {
        reads->bufs[u] = std::move(r).value();
      } else {
        reads->errs[u] =
            r.ok() ? Status::Corruption("short chunk read") : r.status();
      }
      reads->done |= Bit(i);
      reads->cv.notify_all();
    });
  };

  // First the wanted chunks themselves (skipping known-missing ones).
  for (int i : want)
    if (!(failed & Bit(i))) launch(i);
  auto round_end = Clock::now() + deadline;
  std::unique_lock<std::mutex> lock(reads->mu);
  for (;;) {
    const uint32_t fresh = reads->done & ~harvested;
    harvested |= fresh;
    counted &= ~harvested;
    for (int i = 0; i < n; ++i) {
      if (!(fresh & Bit(i))) continue;
      const size_t u = static_cast<size_t>(i);
      if (reads->errs[u].ok()) {
        have |= Bit(i);
        if (use_deadline) MarkSuspect(layout.servers[u].id, false);
        continue;
      }
      errs[u] = reads->errs[u];
      failed |= Bit(i);
      ClientCounters::Add(counters_.chunk_read_errors);
      if (errs[u].code() == EBADMSG) ClientCounters::Add(counters_.crc_errors);
      if (errs[u].code() == EHOSTDOWN || errs[u].code() == ETIMEDOUT) {
        transport_error = true;
        if (use_deadline) MarkSuspect(layout.servers[u].id, true);
      }
    }
    if ((want_mask & ~have) == 0) break;       // all wanted chunks read
    if (__builtin_popcount(have) >= k) break;  // enough to rebuild
    if (use_deadline && Clock::now() >= round_end) {
      // Reads past the deadline: stop counting on them (they may still
      // win) and read other chunks to reconstruct around them.
      ClientCounters::Add(counters_.slow_chunk_reads,
                          static_cast<uint64_t>(__builtin_popcount(counted)));
      for (int i = 0; i < n; ++i)
        if (counted & Bit(i))
          MarkSuspect(layout.servers[static_cast<size_t>(i)].id, true);
      slow |= counted;
      counted = 0;
      round_end = Clock::now() + deadline;
    }
    if ((want_mask & ~(have | counted)) != 0) {
      // Some wanted chunk failed or is slow: make sure k reads are done or
      // running (and counted on), data chunks first.
      int expect = __builtin_popcount(have | counted);
      for (int i = 0; i < n && expect < k; ++i) {
        if ((launched | failed) & Bit(i)) continue;
        launch(i);
        if (launched & Bit(i)) ++expect;
      }
      if (expect < k && (launched & ~harvested) == 0) {
        Status why;
        for (int i = 0; i < n; ++i)
          KeepWorse(&why, errs[static_cast<size_t>(i)]);
        lock.unlock();
        if (transport_error) RequestMapRefresh();
        return Status::IoError("stripe " + std::to_string(sv.stripe) +
                               " of inode " + std::to_string(ino) + ": only " +
                               std::to_string(__builtin_popcount(have)) +
                               " of " + std::to_string(n) +
                               " chunks readable, need " + std::to_string(k) +
                               (why.ok() ? "" : " (" + why.ToString() + ")"));
      }
    }
    if (use_deadline && counted != 0) {
      reads->cv.wait_until(lock, round_end);
    } else {
      reads->cv.wait(lock);  // each running read ends by its own timeout
    }
  }

  // Take the buffers of the chunks read; reads still running are abandoned
  // (their results land in `reads`, which they keep alive).
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    if (have & Bit(i))
      bufs[static_cast<size_t>(i)] =
          std::move(reads->bufs[static_cast<size_t>(i)]);
  const uint32_t abandoned = launched & ~harvested;
  lock.unlock();
  if (abandoned != 0) {
    ClientCounters::Add(counters_.abandoned_chunk_reads,
                        static_cast<uint64_t>(__builtin_popcount(abandoned)));
  }
  if (transport_error || slow != 0) RequestMapRefresh();

  const uint32_t lost = want_mask & ~have;
  if (lost != 0) {
    ClientCounters::Add(counters_.degraded_reads);
    std::vector<uint8_t*> ptrs(static_cast<size_t>(n), nullptr);
    std::vector<int> erased, unavailable;
    for (int i = 0; i < n; ++i) {
      if (have & Bit(i)) {
        ptrs[static_cast<size_t>(i)] = bufs[static_cast<size_t>(i)].data();
      } else if (lost & Bit(i)) {
        bufs[static_cast<size_t>(i)].assign(len, 0);
        ptrs[static_cast<size_t>(i)] = bufs[static_cast<size_t>(i)].data();
        erased.push_back(i);
      } else {
        unavailable.push_back(i);
      }
    }
    STRIPEFS_RETURN_IF_ERROR(
        codec_->Reconstruct(ptrs, erased, len, unavailable));
  }
  out->clear();
  for (int i : want) out->push_back(std::move(bufs[static_cast<size_t>(i)]));
  return Status::Ok();
}

Result<size_t> StripeClient::Read(uint64_t ino, uint64_t offset,
                                  std::span<uint8_t> out, uint64_t file_size) {
  if (offset >= file_size || out.empty()) return size_t{0};
  const uint64_t total = std::min<uint64_t>(out.size(), file_size - offset);
  const uint64_t S = stripe_size();
  const uint32_t c = geometry_.cell_size;
  const uint64_t first = offset / S, last = (offset + total - 1) / S;
  auto stripes = meta_->GetStripes(ino, first, last - first + 1);
  if (!stripes.ok()) return stripes.status().Annotate("reading stripe map");
  size_t next = 0;  // index into *stripes
  for (uint64_t s = first; s <= last; ++s) {
    const uint64_t s_begin = std::max(offset, s * S);
    const uint64_t s_end = std::min(offset + total, (s + 1) * S);
    uint8_t* dst = out.data() + (s_begin - offset);
    std::memset(dst, 0, s_end - s_begin);
    while (next < stripes->size() && (*stripes)[next].stripe < s) ++next;
    if (next == stripes->size() || (*stripes)[next].stripe != s) continue;
    StripeVersion sv = (*stripes)[next];
    // Cells touched and the column range they share within the chunks.
    const uint64_t a = s_begin - s * S, b = s_end - s * S;  // [a, b) in stripe
    std::vector<int> want;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint64_t cell = a / c; cell <= (b - 1) / c; ++cell) {
      uint64_t ca = std::max<uint64_t>(a, cell * c) - cell * c;
      uint64_t cb = std::min<uint64_t>(b, (cell + 1) * c) - cell * c;
      cb = std::min<uint64_t>(cb, sv.chunk_len);
      if (ca >= cb) continue;  // past the chunk's stored bytes: zeros
      want.push_back(static_cast<int>(cell));
      lo = std::min<uint32_t>(lo, static_cast<uint32_t>(ca));
      hi = std::max<uint32_t>(hi, static_cast<uint32_t>(cb));
    }
    if (want.empty()) continue;
    std::vector<std::vector<uint8_t>> cols;
    Status st;
    for (int attempt = 0; attempt < 3; ++attempt) {
      st = ReadColumns(ino, sv, LayoutFor(ino, s), want, lo, hi, &cols);
      if (st.ok()) break;
      // Servers may have come back (or gone) since our map was read.
      auto map_changed = RefreshClusterMapIfChanged();
      // A writer may have replaced (and collected) this version meanwhile.
      bool exists = false;
      auto now = CurrentStripe(ino, s, &exists);
      if (now.ok() && exists && now->version != sv.version) {
        sv = *now;
        continue;
      }
      if (!map_changed.ok() || !*map_changed) break;
    }
    if (!st.ok()) return st;
    for (size_t w = 0; w < want.size(); ++w) {
      const uint64_t cell = static_cast<uint64_t>(want[w]);
      uint64_t ca = std::max<uint64_t>(a, cell * c) - cell * c;
      uint64_t cb = std::min<uint64_t>({b - cell * c, c, sv.chunk_len});
      if (ca >= cb) continue;
      std::memcpy(out.data() + (s * S + cell * c + ca - offset),
                  cols[w].data() + (ca - lo), cb - ca);
    }
  }
  ClientCounters::Add(counters_.bytes_read, total);
  return static_cast<size_t>(total);
}

// --- writes ------------------------------------------------------------------

uint32_t StripeClient::RunChunkOps(
    const Layout& layout, const std::vector<int>& indices,
    const std::function<Status(ChunkService*, uint32_t)>& op, Status* error) {
  std::vector<Status> errs(indices.size());
  std::vector<std::function<void()>> tasks;
  for (size_t j = 0; j < indices.size(); ++j) {
    tasks.push_back([&, j] {
      const auto i = static_cast<uint32_t>(indices[j]);
      ChunkService* svc = layout.Usable(i, &errs[j]);
      if (svc == nullptr) return;
      errs[j] = op(svc, i);
    });
  }
  pool_.RunAll(std::move(tasks));
  uint32_t failed = 0;
  bool transport_error = false;
  for (size_t j = 0; j < indices.size(); ++j) {
    if (!errs[j].ok()) {
      failed |= Bit(indices[j]);
      ClientCounters::Add(counters_.chunk_write_errors);
      KeepWorse(error, errs[j]);
      transport_error |=
          errs[j].code() == EHOSTDOWN || errs[j].code() == ETIMEDOUT;
    }
  }
  if (transport_error) RequestMapRefresh();
  return failed;
}

uint32_t StripeClient::WriteChunks(
    uint64_t ino, uint64_t stripe, uint64_t version, const Layout& layout,
    const std::vector<std::pair<int, std::span<const uint8_t>>>& chunks,
    Status* error) {
  std::vector<int> indices;
  std::vector<std::span<const uint8_t>> by_index(geometry_.k + geometry_.m);
  for (const auto& [i, bytes] : chunks) {
    indices.push_back(i);
    by_index[static_cast<size_t>(i)] = bytes;
  }
  return RunChunkOps(
      layout, indices,
      [&](ChunkService* svc, uint32_t i) {
        return svc->WriteChunk({ino, stripe, i}, version, by_index[i]);
      },
      error);
}

void StripeClient::DeleteOtherVersions(uint64_t ino, uint64_t stripe,
                                       uint64_t keep, const Layout& layout) {
  const int n = static_cast<int>(geometry_.k + geometry_.m);
  for (int i = 0; i < n; ++i) {
    ChunkService* svc = layout.services[static_cast<size_t>(i)];
    if (svc == nullptr || IsDown(layout.servers[static_cast<size_t>(i)]))
      continue;  // scrub collects what is left on down servers
    Status st = svc->DeleteChunk({ino, stripe, static_cast<uint32_t>(i)}, keep);
    ClientCounters::Add(st.ok() ? counters_.gc_chunk_deletes
                                : counters_.gc_errors);
  }
}

void StripeClient::DeleteVersion(uint64_t ino, uint64_t stripe,
                                 uint64_t version, const Layout& layout,
                                 uint32_t mask) {
  const int n = static_cast<int>(geometry_.k + geometry_.m);
  for (int i = 0; i < n; ++i) {
    ChunkService* svc = layout.services[static_cast<size_t>(i)];
    if (!(mask & Bit(i)) || svc == nullptr) continue;
    Status st = svc->DeleteChunkVersion({ino, stripe, static_cast<uint32_t>(i)},
                                        version);
    // Unsupported or failed: the chunk is an orphan that scrub collects.
    ClientCounters::Add(st.ok() ? counters_.gc_chunk_deletes
                                : counters_.gc_errors);
  }
}

Status StripeClient::Write(uint64_t ino, uint64_t offset,
                           std::span<const uint8_t> data, uint64_t size_cap) {
  const uint64_t S = stripe_size();
  uint64_t pos = 0;
  while (pos < data.size()) {
    const uint64_t abs = offset + pos;
    const uint64_t s = abs / S, off = abs % S;
    const uint64_t n = std::min<uint64_t>(S - off, data.size() - pos);
    STRIPEFS_RETURN_IF_ERROR(WriteStripe(ino, s, off, data.subspan(pos, n),
                                         std::min(abs + n, size_cap),
                                         UINT64_MAX));
    pos += n;
  }
  ClientCounters::Add(counters_.bytes_written, data.size());
  return Status::Ok();
}

Status StripeClient::WriteStripe(uint64_t ino, uint64_t stripe, uint64_t off,
                                 std::span<const uint8_t> data,
                                 uint64_t min_file_size, uint64_t zero_from) {
  const uint32_t k = geometry_.k, m = geometry_.m, c = geometry_.cell_size;
  const uint64_t S = stripe_size();
  const uint64_t end = off + data.size();
  std::lock_guard<std::mutex> stripe_lock(StripeLock(ino, stripe));

  for (int attempt = 0; attempt <= options_.commit_retries; ++attempt) {
    bool exists = false;
    STRIPEFS_ASSIGN_OR_RETURN(StripeVersion old,
                              CurrentStripe(ino, stripe, &exists));
    const bool truncating = zero_from != UINT64_MAX;
    if (truncating && !exists) return Status::Ok();  // a hole stays a hole
    // Chunk length of the new version: enough for the old bytes and the new.
    uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(c, end));
    if (exists) len = std::max(len, old.chunk_len);
    if (truncating) {
      len = static_cast<uint32_t>(std::min<uint64_t>({c, zero_from}));
      len = std::max<uint32_t>(
          len, static_cast<uint32_t>(std::min<uint64_t>(c, end)));
    }
    if (len == 0) len = 1;  // a stripe truncated to nothing keeps one byte
    const Layout layout = LayoutFor(ino, stripe);
    STRIPEFS_ASSIGN_OR_RETURN(const uint64_t version, NextVersion());

    // Touched data cells.
    const uint32_t cell_first = static_cast<uint32_t>(off / c);
    const uint32_t cell_last =
        data.empty() ? cell_first : static_cast<uint32_t>((end - 1) / c);
    const uint32_t touched = data.empty() ? 0 : cell_last - cell_first + 1;

    // Byte range of the touched cells inside a cell: what a parity-delta
    // update reads and rewrites of the touched data chunks and of every
    // parity chunk (all of [0, len) as soon as two cells are touched).
    uint32_t win_lo = 0, win_hi = len;
    if (touched == 1) {
      win_lo = static_cast<uint32_t>(off - uint64_t{cell_first} * c);
      win_hi = static_cast<uint32_t>(end - uint64_t{cell_first} * c);
    }
    const uint64_t win = win_hi - win_lo;
    enum { kFull, kNewPartial, kRmw, kDelta } kind;

    const bool whole = off == 0 && end == S && !truncating;
    // Parity delta moves (touched + m) windows, RMW reads k whole chunks and
    // writes k + m.
    const bool delta_ok = options_.parity_delta && exists && !truncating &&
                          touched > 0 && old.missing_mask == 0 &&
                          len == old.chunk_len &&
                          uint64_t{touched + m} * win < uint64_t{k} * len;
    if (whole || !exists) {
      kind = whole ? kFull : kNewPartial;
    } else if (delta_ok) {
      kind = kDelta;
    } else {
      kind = kRmw;
    }

    Status write_error;
    uint32_t failed = 0;
    if (kind == kDelta) {
      // Old bytes of the window in the touched data chunks and in parity.
      std::vector<int> want;
      for (uint32_t i = cell_first; i <= cell_last; ++i)
        want.push_back(static_cast<int>(i));
      for (uint32_t p = 0; p < m; ++p) want.push_back(static_cast<int>(k + p));
      std::vector<std::vector<uint8_t>> got;  // parallel to `want`
      Status rs = ReadColumns(ino, old, layout, want, win_lo, win_hi, &got);
      if (!rs.ok()) {
        if (attempt < options_.commit_retries && MovedOn(ino, stripe, old)) {
          continue;  // another client committed (and GC'd our base): retry
        }
        return rs.Annotate("parity-delta read");
      }
      ClientCounters::Add(counters_.rmw_bytes_read,
                          uint64_t{touched + m} * win);
      std::vector<std::vector<uint8_t>> window(k + m);
      for (size_t w = 0; w < want.size(); ++w)
        window[static_cast<size_t>(want[w])] = std::move(got[w]);
      for (uint32_t i = cell_first; i <= cell_last; ++i) {
        const uint64_t ca =
            std::max<uint64_t>(off, uint64_t{i} * c) - uint64_t{i} * c;
        const uint64_t cb =
            std::min<uint64_t>(end, uint64_t{i + 1} * c) - uint64_t{i} * c;
        const uint8_t* src = data.data() + (uint64_t{i} * c + ca - off);
        std::vector<uint8_t*> parity;
        for (uint32_t p = 0; p < m; ++p)
          parity.push_back(window[k + p].data() + (ca - win_lo));
        uint8_t* old_bytes = window[i].data() + (ca - win_lo);
        STRIPEFS_RETURN_IF_ERROR(codec_->UpdateParity(
            static_cast<int>(i), old_bytes, src, parity, cb - ca));
        std::memcpy(old_bytes, src, cb - ca);
      }
      // New version: patched windows of the touched data and parity chunks,
      // the untouched data chunks carried over by CloneChunk.
      failed = RunChunkOps(
          layout, want,
          [&](ChunkService* svc, uint32_t i) {
            return svc->PatchChunk({ino, stripe, i}, old.version, version, len,
                                   win_lo, window[i]);
          },
          &write_error);
      std::vector<int> untouched;
      for (uint32_t i = 0; i < k; ++i)
        if (i < cell_first || i > cell_last)
          untouched.push_back(static_cast<int>(i));
      failed |= RunChunkOps(
          layout, untouched,
          [&](ChunkService* svc, uint32_t i) {
            return svc->CloneChunk({ino, stripe, i}, old.version, version, len);
          },
          &write_error);
    } else {
      std::vector<std::vector<uint8_t>> cells(k + m,
                                              std::vector<uint8_t>(len, 0));
      if (kind == kRmw) {
        // Old data cells that hold bytes (the rest are zeros).
        std::vector<int> want;
        for (uint32_t i = 0; i < k; ++i) want.push_back(static_cast<int>(i));
        std::vector<std::vector<uint8_t>> old_cells;
        Status rs =
            ReadColumns(ino, old, layout, want, 0, old.chunk_len, &old_cells);
        if (!rs.ok()) {
          if (attempt < options_.commit_retries && MovedOn(ino, stripe, old)) {
            continue;  // another client committed (and GC'd our base): retry
          }
          return rs.Annotate("read-modify-write");
        }
        for (uint32_t i = 0; i < k; ++i)
          std::memcpy(cells[i].data(), old_cells[i].data(),
                      std::min(old.chunk_len, len));
        ClientCounters::Add(counters_.rmw_bytes_read,
                            uint64_t{k} * old.chunk_len);
      }
      // Merge the new bytes.
      for (uint32_t i = cell_first; touched > 0 && i <= cell_last; ++i) {
        const uint64_t ca =
            std::max<uint64_t>(off, uint64_t{i} * c) - uint64_t{i} * c;
        const uint64_t cb =
            std::min<uint64_t>(end, uint64_t{i + 1} * c) - uint64_t{i} * c;
        std::memcpy(cells[i].data() + ca,
                    data.data() + (uint64_t{i} * c + ca - off), cb - ca);
      }
      if (truncating) {
        for (uint32_t i = 0; i < k; ++i) {
          const uint64_t cell_start = uint64_t{i} * c;
          if (zero_from >= cell_start + len) continue;
          const uint64_t from =
              zero_from > cell_start ? zero_from - cell_start : 0;
          std::memset(cells[i].data() + from, 0, len - from);
        }
      }
      std::vector<const uint8_t*> dptr;
      std::vector<uint8_t*> pptr;
      for (uint32_t i = 0; i < k; ++i) dptr.push_back(cells[i].data());
      for (uint32_t p = 0; p < m; ++p) pptr.push_back(cells[k + p].data());
      STRIPEFS_RETURN_IF_ERROR(codec_->Encode(dptr, pptr, len));
      std::vector<std::pair<int, std::span<const uint8_t>>> to_write;
      for (uint32_t i = 0; i < k + m; ++i)
        to_write.emplace_back(static_cast<int>(i), cells[i]);
      failed =
          WriteChunks(ino, stripe, version, layout, to_write, &write_error);
    }
    if (static_cast<uint32_t>(__builtin_popcount(failed)) > m) {
      // Remove what did land of the new version; the old one stays.
      DeleteVersion(ino, stripe, version, layout, ~failed);
      // Servers may have come back since our map was read: retry on the
      // new map (bounded by commit_retries).
      auto map_changed = RefreshClusterMapIfChanged();
      if (map_changed.ok() && *map_changed && attempt < options_.commit_retries)
        continue;
      // Patches and clones start from the old version: if another client
      // committed meanwhile and collected it, retry on the new version.
      if (exists && attempt < options_.commit_retries &&
          MovedOn(ino, stripe, old))
        continue;
      ClientCounters::Add(counters_.failed_writes);
      return Status(write_error.code() == ENOSPC ? ENOSPC : EIO,
                    "stripe " + std::to_string(stripe) + " of inode " +
                        std::to_string(ino) + ": " +
                        std::to_string(__builtin_popcount(failed)) +
                        " chunk writes failed, at most " + std::to_string(m) +
                        " tolerated; previous data kept (" +
                        write_error.ToString() + ")");
    }

    StripeVersion sv{stripe, version, failed, len};
    ObsoleteStripe obsolete;
    Status st = meta_->CommitStripe(ino, sv, exists ? old.version : 0,
                                    min_file_size, &obsolete);
    if (st.code() == ESTALE) {
      ClientCounters::Add(counters_.commit_conflicts);
      DeleteVersion(ino, stripe, version, layout, ~failed);
      continue;
    }
    if (!st.ok()) return st.Annotate("committing stripe");

    switch (kind) {
      case kFull:
        ClientCounters::Add(counters_.full_stripe_writes);
        break;
      case kNewPartial:
        ClientCounters::Add(counters_.new_partial_stripes);
        break;
      case kRmw:
        ClientCounters::Add(counters_.rmw_stripes);
        break;
      case kDelta:
        ClientCounters::Add(counters_.parity_delta_updates);
        break;
    }
    if (failed != 0) ClientCounters::Add(counters_.degraded_writes);
    if (exists) DeleteOtherVersions(ino, stripe, version, layout);
    return Status::Ok();
  }
  return Status(EAGAIN, "stripe " + std::to_string(stripe) + " of inode " +
                            std::to_string(ino) +
                            ": too many concurrent writers, gave up");
}

// --- truncate and garbage collection
// ------------------------------------------

Result<InodeAttr> StripeClient::Truncate(uint64_t ino, uint64_t old_size,
                                         uint64_t new_size) {
  const uint64_t S = stripe_size();
  if (new_size < old_size && new_size % S != 0) {
    STRIPEFS_RETURN_IF_ERROR(
        WriteStripe(ino, new_size / S, new_size % S, {}, 0, new_size % S)
            .Annotate("truncate"));
  }
  SetAttrRequest req;
  req.mask = kSetSize;
  req.size = new_size;
  std::vector<ObsoleteStripe> obsolete;
  auto attr = meta_->SetAttr(ino, req, &obsolete);
  if (!attr.ok()) return attr.status();
  DeleteStripes(obsolete);
  return attr;
}

void StripeClient::DeleteStripes(const std::vector<ObsoleteStripe>& obsolete) {
  const uint32_t n = geometry_.k + geometry_.m;
  for (const auto& o : obsolete) {
    std::lock_guard<std::mutex> lock(StripeLock(o.inode, o.stripe));
    const Layout layout = LayoutFor(o.inode, o.stripe);
    for (uint32_t i = 0; i < n; ++i) {
      ChunkService* svc = layout.services[i];
      if (svc == nullptr || IsDown(layout.servers[i])) continue;
      ChunkId id{o.inode, o.stripe, i};
      Status st = svc->DeleteChunkVersion(id, o.version);
      if (st.code() == EOPNOTSUPP) {
        // The stripe no longer exists in metadata and we hold its lock:
        // every version on this server is garbage.
        st = svc->DeleteChunk(id, 0);
      }
      ClientCounters::Add(st.ok() ? counters_.gc_chunk_deletes
                                  : counters_.gc_errors);
    }
  }
}

// --- repair
// ---------------------------------------------------------------------

Result<uint32_t> StripeClient::RepairStripe(uint64_t ino,
                                            const StripeVersion& sv,
                                            bool verify) {
  const int k = static_cast<int>(geometry_.k);
  const int n = k + static_cast<int>(geometry_.m);
  const uint32_t len = sv.chunk_len;
  std::lock_guard<std::mutex> stripe_lock(StripeLock(ino, sv.stripe));
  const Layout layout = LayoutFor(ino, sv.stripe);

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
  pool_.RunAll(std::move(tasks));

  uint32_t bad = 0, unreachable = 0;
  for (int i = 0; i < n; ++i) {
    const size_t u = static_cast<size_t>(i);
    if (errs[u].ok()) continue;
    if (errs[u].code() == EBADMSG) ClientCounters::Add(counters_.crc_errors);
    if (layout.services[u] == nullptr || IsDown(layout.servers[u]) ||
        errs[u].code() == EHOSTDOWN) {
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
    return codec_->Reconstruct(ptrs, erased, len, unavailable);
  };
  // True when the parity of `c` matches its data.
  auto consistent = [&](const std::vector<std::vector<uint8_t>>& c) {
    std::vector<const uint8_t*> d;
    std::vector<std::vector<uint8_t>> parity(static_cast<size_t>(n - k),
                                             std::vector<uint8_t>(len));
    std::vector<uint8_t*> p;
    for (int i = 0; i < k; ++i) d.push_back(c[static_cast<size_t>(i)].data());
    for (auto& v : parity) p.push_back(v.data());
    if (!codec_->Encode(d, p, len).ok()) return false;
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
    failed =
        WriteChunks(ino, sv.stripe, sv.version, layout, to_write, &write_error);
    rewritten = static_cast<uint32_t>(to_write.size()) -
                static_cast<uint32_t>(__builtin_popcount(failed));
  }
  const uint32_t still_missing = failed | unreachable;
  if (still_missing != sv.missing_mask) {
    Status st =
        meta_->SetStripeMissing(ino, sv.stripe, sv.version, still_missing);
    if (!st.ok() && st.code() != ESTALE) return st;
  }
  if (failed != 0) return write_error.Annotate("repair write");
  return rewritten;
}

}  // namespace stripefs

#include "backend/client/stripe_write.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace stripefs {

namespace {

std::string StripeName(uint64_t ino, uint64_t stripe) {
  return "stripe " + std::to_string(stripe) + " of inode " +
         std::to_string(ino);
}

int Popcount(uint32_t v) { return __builtin_popcount(v); }

}  // namespace

Status ValidateWriteRequest(const StripeGeometry& geo,
                            const StripeWriteRequest& req) {
  const uint64_t S = geo.stripe_size();
  const uint64_t buf_end = uint64_t{req.origin} + req.bytes.size();
  uint64_t prev_end = 0;
  for (const StripeRange& r : req.ranges) {
    if (r.begin >= r.end || r.end > S || r.begin < prev_end ||
        r.begin < req.origin || r.end > buf_end) {
      return Status::InvalidArgument(
          "bad write range [" + std::to_string(r.begin) + ", " +
          std::to_string(r.end) + ") of " + StripeName(req.ino, req.stripe) +
          ": ranges must be sorted, disjoint, non-empty and inside the " +
          std::to_string(S) + "-byte stripe and the buffer");
    }
    prev_end = r.end;
  }
  if (req.ranges.empty() && req.zero_from == kNoTruncate) {
    return Status::InvalidArgument(
        "write of " + StripeName(req.ino, req.stripe) + " has no byte ranges");
  }
  return Status::Ok();
}

std::vector<ColumnWindow> MergeColumnWindows(std::vector<ColumnWindow> windows,
                                             uint32_t gap, size_t max_windows) {
  std::sort(windows.begin(), windows.end(),
            [](const ColumnWindow& a, const ColumnWindow& b) {
              return a.lo < b.lo || (a.lo == b.lo && a.hi < b.hi);
            });
  std::vector<ColumnWindow> out;
  for (const ColumnWindow& w : windows) {
    if (w.lo >= w.hi) continue;
    if (!out.empty() && uint64_t{w.lo} < uint64_t{out.back().hi} + gap) {
      out.back().hi = std::max(out.back().hi, w.hi);
    } else {
      out.push_back(w);
    }
  }
  // Too many: merge the two neighbours with the smallest gap, repeatedly
  // (each round removes one window, so this ends).
  while (out.size() > std::max<size_t>(max_windows, 1)) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < out.size(); ++i)
      if (out[i + 1].lo - out[i].hi < out[best + 1].lo - out[best].hi) best = i;
    out[best].hi = out[best + 1].hi;
    out.erase(out.begin() + static_cast<ptrdiff_t>(best) + 1);
  }
  return out;
}

WritePlan PlanStripeWrite(const StripeGeometry& geo, bool parity_delta,
                          const StripeVersion* base,
                          const StripeWriteRequest& req) {
  const uint32_t k = geo.k(), m = geo.m(), c = geo.cell_size();
  const bool truncating = req.zero_from != kNoTruncate;
  WritePlan plan;
  plan.zero_from = req.zero_from;
  const uint64_t end = req.ranges.empty() ? 0 : req.ranges.back().end;
  // Chunk length of the new version: enough for the old bytes and the new.
  uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(c, end));
  if (base != nullptr) len = std::max(len, base->chunk_len);
  if (truncating) {
    len = static_cast<uint32_t>(std::min<uint64_t>(c, req.zero_from));
    len = std::max(len, static_cast<uint32_t>(std::min<uint64_t>(c, end)));
  }
  if (len == 0) len = 1;  // a stripe truncated to nothing keeps one byte
  plan.chunk_len = len;

  // Touched cells, each cell's own column window, and the parity windows
  // (the union of every touched column interval: parity column x changes
  // where any cell's column x does).
  plan.cell_windows.assign(k, {});
  std::vector<ColumnWindow> touched_columns;
  for (const StripeRange& r : req.ranges) {
    geo.ForEachCell(r.begin, r.end, c, [&](const CellSpan& span) {
      plan.touched |= ChunkBit(span.cell);
      const uint32_t lo = std::min(span.lo, len), hi = std::min(span.hi, len);
      if (lo >= hi) return;
      plan.cell_windows[span.cell].push_back({lo, hi});
      touched_columns.push_back({lo, hi});
    });
  }
  for (std::vector<ColumnWindow>& cw : plan.cell_windows)
    cw = MergeColumnWindows(std::move(cw), kParityWindowGap, kMaxParityWindows);
  plan.parity_windows = MergeColumnWindows(std::move(touched_columns),
                                           kParityWindowGap, kMaxParityWindows);
  // What a delta reads (and sends back): each touched cell's window and m
  // times the parity windows.
  uint64_t delta_bytes = 0;
  for (const ColumnWindow& w : plan.parity_windows)
    delta_bytes += uint64_t{m} * (w.hi - w.lo);
  for (const std::vector<ColumnWindow>& cw : plan.cell_windows)
    for (const ColumnWindow& w : cw) delta_bytes += w.hi - w.lo;

  const bool whole = !truncating && req.ranges.size() == 1 &&
                     req.ranges[0].begin == 0 &&
                     req.ranges[0].end == geo.stripe_size();
  // A delta reads those windows; RMW reads k whole chunks and writes
  // k + m (a delta rewrites only the touched and parity chunks, on the
  // servers, and clones the rest).
  const bool delta_ok = parity_delta && base != nullptr && !truncating &&
                        plan.touched != 0 && !plan.parity_windows.empty() &&
                        base->missing_mask == 0 && len == base->chunk_len &&
                        delta_bytes < uint64_t{k} * len;
  if (whole) {
    plan.kind = WriteKind::kFull;
  } else if (base == nullptr) {
    plan.kind = WriteKind::kNewPartial;
  } else if (delta_ok) {
    plan.kind = WriteKind::kDelta;
  } else {
    plan.kind = WriteKind::kRmw;
  }
  return plan;
}

Result<uint64_t> StripeWriteExecutor::NextVersion() {
  std::lock_guard<std::mutex> lock(version_mu_);
  if (next_version_ == version_limit_) {
    auto first = p_.meta->AllocateVersions(options_.version_batch);
    if (!first.ok()) return first.status().Annotate("allocating versions");
    next_version_ = *first;
    version_limit_ = *first + options_.version_batch;
  }
  return next_version_++;
}

bool StripeWriteExecutor::MovedOn(uint64_t ino, const StripeVersion& base) {
  auto now = p_.meta->GetStripes(ino, base.stripe, 1);
  if (!now.ok()) return false;
  // Replaced, or dropped (a truncate): a base from the map cache can be
  // either, until a commit says so.
  if (!now->empty() && now->front().stripe == base.stripe &&
      now->front().version == base.version)
    return false;
  ClientCounters::Add(p_.counters->commit_conflicts);
  Stale(ino);
  return true;
}

void StripeWriteExecutor::Stale(uint64_t ino) { p_.maps->Forget(ino); }

Result<std::optional<StripeVersion>> StripeWriteExecutor::CommittedBase(
    const StripeWriteRequest& req) {
  auto read = [&](uint64_t first, uint64_t count) {
    return p_.meta->GetStripes(req.ino, first, count);
  };
  std::vector<StripeVersion> found;
  if (req.zero_from != kNoTruncate) {
    // Leaving a hole as it is must not rest on a cache: ask metadata.
    STRIPEFS_ASSIGN_OR_RETURN(found, read(req.stripe, 1));
  } else {
    STRIPEFS_ASSIGN_OR_RETURN(
        found, p_.maps->ReadThrough(req.ino, req.stripe, 1, kStripeMapWindow,
                                    StripeMapCache::Use::kWriteBase, read));
  }
  if (found.empty() || found.front().stripe != req.stripe)
    return std::optional<StripeVersion>();
  return std::optional<StripeVersion>(found.front());
}

void StripeWriteExecutor::WarmMap(uint64_t ino, uint64_t first, uint64_t last) {
  const uint64_t count = last - first + 1;
  if (count > kStripeMapWindow) return;
  // Best effort: a failed read leaves each stripe to its CommittedBase.
  (void)p_.maps->ReadThrough(ino, first, count, count,
                             StripeMapCache::Use::kWriteBase,
                             [&](uint64_t from, uint64_t n) {
                               return p_.meta->GetStripes(ino, from, n);
                             });
}

// Where the members of a wave (one stripe each, on its own thread) meet:
// each hands in its items (Hand) or says it has none (Leave); the last
// member to arrive runs `run_` over all of them at once, and every member
// gets its own items' statuses back. Each member arrives at most once; a
// member that hands in items again later (after the meeting) runs them on
// its own.
template <typename Item>
class WaveRendezvous {
 public:
  using Runner = std::function<std::vector<Status>(std::span<const Item>)>;
  WaveRendezvous(Runner run, size_t members)
      : run_(std::move(run)), waiting_(members), arrived_(members, 0) {}

  std::vector<Status> Hand(size_t member, std::span<const Item> items) {
    std::unique_lock<std::mutex> lock(mu_);
    if (arrived_[member]) {
      lock.unlock();
      return run_(items);
    }
    const size_t first = items_.size();
    items_.insert(items_.end(), items.begin(), items.end());
    Arrive(member, &lock);
    return std::vector<Status>(
        results_.begin() + static_cast<ptrdiff_t>(first),
        results_.begin() + static_cast<ptrdiff_t>(first + items.size()));
  }
  void Leave(size_t member) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!arrived_[member]) Arrive(member, &lock);
  }

 private:
  void Arrive(size_t member, std::unique_lock<std::mutex>* lock) {
    arrived_[member] = 1;
    if (--waiting_ == 0) {
      // Everyone is in: no one touches items_ any more.
      lock->unlock();
      std::vector<Status> results = run_(items_);
      results.resize(items_.size(),
                     Status::IoError("wave ran fewer items than handed in"));
      lock->lock();
      results_ = std::move(results);
      done_ = true;
      cv_.notify_all();
      return;
    }
    cv_.wait(*lock, [&] { return done_; });
  }

  const Runner run_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t waiting_;               // guarded by mu_
  std::vector<char> arrived_;    // guarded by mu_
  std::vector<Item> items_;      // guarded by mu_ until done_
  std::vector<Status> results_;  // set once done_
  bool done_ = false;            // guarded by mu_
};

struct StripeWriteExecutor::Wave {
  Wave(ChunkFanout* fanout, StripeReader* reader, size_t members)
      : reads(
            [fanout, reader](std::span<const ChunkFanout::BatchRead> items) {
              return fanout->ReadBatch(items, reader->DirectDeadline());
            },
            members),
        writes(
            [fanout](std::span<const ChunkFanout::BatchOp> items) {
              return fanout->RunBatch(items);
            },
            members) {}
  void Leave(size_t member) {
    reads.Leave(member);
    writes.Leave(member);
  }
  // Hands `items` to the write batch, having left the reads first: a
  // member still expected at the reads would wait there for this one
  // forever.
  std::vector<Status> Write(size_t member,
                            std::span<const ChunkFanout::BatchOp> items) {
    reads.Leave(member);
    return writes.Hand(member, items);
  }
  WaveRendezvous<ChunkFanout::BatchRead> reads;
  WaveRendezvous<ChunkFanout::BatchOp> writes;
};

Status StripeWriteExecutor::MakeDelta(Prepared* p, Status* write_error) {
  const StripeWriteRequest& req = *p->req;
  const WritePlan& plan = p->plan;
  const uint32_t k = geo_.k(), m = geo_.m();
  // The windows of chunk i: a touched data cell's own, the parity windows
  // for parity; all of a chunk's windows packed one after another in one
  // buffer (packed[i][w] = where window w starts there), which is also
  // its patch's bytes.
  std::vector<const std::vector<ColumnWindow>*> wins(k + m, nullptr);
  for (uint32_t i = 0; i < k; ++i)
    if (plan.touched & ChunkBit(i)) wins[i] = &plan.cell_windows[i];
  for (uint32_t q = k; q < k + m; ++q) wins[q] = &plan.parity_windows;
  // All chunks' windows live in one allocation, not zero-filled: the reads
  // below fill every byte before anything uses it.
  std::vector<std::vector<uint32_t>> packed(k + m);
  std::vector<std::span<uint8_t>> window(k + m);
  std::vector<uint32_t> chunk_bytes(k + m, 0);
  uint64_t read_bytes = 0;
  for (uint32_t i = 0; i < k + m; ++i) {
    if (wins[i] == nullptr) continue;
    for (const ColumnWindow& w : *wins[i]) {
      packed[i].push_back(chunk_bytes[i]);
      chunk_bytes[i] += w.hi - w.lo;
    }
    read_bytes += chunk_bytes[i];
  }
  std::unique_ptr<uint8_t[]> windows(new uint8_t[read_bytes]);
  std::vector<StripeReader::WindowRead> reads;
  uint64_t at = 0;
  for (uint32_t i = 0; i < k + m; ++i) {
    if (wins[i] == nullptr) continue;
    window[i] = {windows.get() + at, chunk_bytes[i]};
    at += chunk_bytes[i];
    for (size_t w = 0; w < wins[i]->size(); ++w) {
      const ColumnWindow& cw = (*wins[i])[w];
      reads.push_back({i, cw.lo, cw.hi, window[i].data() + packed[i][w]});
    }
  }
  // Old bytes of every window: with the wave's other stripes, one request
  // per server; else one parallel round (per 32 windows).
  STRIPEFS_RETURN_IF_ERROR(ReadDeltaWindows(p, reads));
  ClientCounters::Add(p_.counters->rmw_bytes_read, read_bytes);
  // Where columns [lo, hi) of chunk i are in its packed buffer (the plan's
  // windows cover every touched column, so some window holds them).
  auto locate = [&](uint32_t i, uint32_t lo, uint32_t hi) -> uint8_t* {
    if (wins[i] == nullptr) return nullptr;
    const std::vector<ColumnWindow>& ws = *wins[i];
    auto it = std::upper_bound(
        ws.begin(), ws.end(), lo,
        [](uint32_t x, const ColumnWindow& w) { return x < w.lo; });
    if (it == ws.begin() || (it - 1)->hi < hi) return nullptr;
    const size_t w = static_cast<size_t>(it - 1 - ws.begin());
    return window[i].data() + packed[i][w] + (lo - ws[w].lo);
  };
  for (const StripeRange& r : req.ranges) {
    Status st;
    geo_.ForEachCell(r.begin, r.end, geo_.cell_size(), [&](const CellSpan& s) {
      if (!st.ok()) return;
      uint8_t* old_bytes = locate(s.cell, s.lo, s.hi);
      std::vector<uint8_t*> parity;
      for (uint32_t q = 0; q < m; ++q)
        parity.push_back(locate(k + q, s.lo, s.hi));
      if (old_bytes == nullptr || parity[0] == nullptr) {
        st = Status::InvalidArgument(
            "parity-delta plan has no window for columns [" +
            std::to_string(s.lo) + ", " + std::to_string(s.hi) + ") of cell " +
            std::to_string(s.cell));
        return;
      }
      const uint8_t* src = req.At(geo_.StripeOffset(s.cell, s.lo));
      st = p_.codec->UpdateParity(static_cast<int>(s.cell), old_bytes, src,
                                  parity, s.hi - s.lo);
      std::memcpy(old_bytes, src, s.hi - s.lo);
    });
    STRIPEFS_RETURN_IF_ERROR(st);
  }
  // New version: patched windows of the touched data and parity chunks
  // (a chunk with several windows: one multi-range patch, still one new
  // version), the untouched data chunks carried over by CloneChunk, all at
  // once (one group commit per server, not a patch round and then a clone
  // round).
  std::vector<std::vector<PatchRange>> ranges(k + m);
  std::vector<ChunkWriteOp> ops(k + m);
  for (uint32_t i = 0; i < k + m; ++i) {
    ChunkWriteOp& op = ops[i];
    op.id = {req.ino, req.stripe, i};
    op.from_version = p->base.version;
    op.to_version = p->version;
    op.length = plan.chunk_len;
    if (wins[i] == nullptr) {
      op.kind = ChunkWriteOp::Kind::kClone;
      continue;
    }
    op.kind = ChunkWriteOp::Kind::kPatch;
    op.bytes = window[i];
    if (wins[i]->size() == 1) {
      op.offset = wins[i]->front().lo;  // one window: the single-range patch
    } else {
      for (const ColumnWindow& w : *wins[i])
        ranges[i].push_back({w.lo, w.hi - w.lo});
      op.ranges = ranges[i];
    }
  }
  p->failed = SendOps(p, std::move(ops), write_error);
  return Status::Ok();
}

Status StripeWriteExecutor::MakeEncoded(Prepared* p, Status* write_error) {
  // Reads nothing with the wave (an RMW reads whole cells on its own).
  if (p->wave != nullptr) p->wave->reads.Leave(p->member);
  const StripeWriteRequest& req = *p->req;
  const WritePlan& plan = p->plan;
  const uint32_t k = geo_.k(), m = geo_.m(), len = plan.chunk_len;
  // Parity (and, unless encoding in place, data) cells come from the pool:
  // no allocation, no page faults, no zero-fill of bytes Encode overwrites.
  std::vector<BufferPool::Lease> cells;
  std::vector<const uint8_t*> dptr;
  std::vector<uint8_t*> pptr;
  if (plan.kind == WriteKind::kFull && len == geo_.cell_size() &&
      req.origin == 0) {
    // A whole stripe is k contiguous cells of the request: encode in place.
    for (uint32_t i = 0; i < k; ++i)
      dptr.push_back(req.At(geo_.StripeOffset(i, 0)));
  } else {
    for (uint32_t i = 0; i < k; ++i) {
      cells.push_back(cell_pool_.Get());
      dptr.push_back(cells.back().data());
    }
    // Bytes no range covers are the old data (RMW: read straight into the
    // cells, degraded columns rebuilt there) or zeros (new stripe, truncate,
    // past a shorter old chunk).
    uint32_t old_len = 0;
    if (plan.kind == WriteKind::kRmw && p->base.chunk_len > 0) {
      old_len = std::min(p->base.chunk_len, len);
      std::vector<StripeReader::WindowRead> reads;
      for (uint32_t i = 0; i < k; ++i)
        reads.push_back({i, 0, old_len, cells[i].data()});
      STRIPEFS_RETURN_IF_ERROR(
          p_.reader->ReadWindows(req.ino, p->base, p->layout, reads));
      ClientCounters::Add(p_.counters->rmw_bytes_read, uint64_t{k} * old_len);
    }
    for (uint32_t i = 0; i < k; ++i)
      std::memset(cells[i].data() + old_len, 0, len - old_len);
    // Merge the new bytes.
    for (const StripeRange& r : req.ranges) {
      geo_.ForEachCell(r.begin, r.end, len, [&](const CellSpan& s) {
        std::memcpy(cells[s.cell].data() + s.lo,
                    req.At(geo_.StripeOffset(s.cell, s.lo)), s.hi - s.lo);
      });
    }
    if (plan.zero_from != kNoTruncate) {
      for (uint32_t i = 0; i < k; ++i) {
        const uint64_t cell_start = geo_.StripeOffset(i, 0);
        if (plan.zero_from >= cell_start + len) continue;
        const uint64_t from =
            plan.zero_from > cell_start ? plan.zero_from - cell_start : 0;
        std::memset(cells[i].data() + from, 0, len - from);
      }
    }
  }
  std::vector<BufferPool::Lease> parity;
  for (uint32_t q = 0; q < m; ++q) {
    parity.push_back(cell_pool_.Get());  // Encode writes every byte
    pptr.push_back(parity.back().data());
  }
  STRIPEFS_RETURN_IF_ERROR(p_.codec->Encode(dptr, pptr, len));
  std::vector<std::pair<int, std::span<const uint8_t>>> to_write;
  for (uint32_t i = 0; i < k; ++i)
    to_write.emplace_back(static_cast<int>(i),
                          std::span<const uint8_t>(dptr[i], len));
  for (uint32_t q = 0; q < m; ++q)
    to_write.emplace_back(static_cast<int>(k + q),
                          std::span<const uint8_t>(pptr[q], len));
  if (p->wave == nullptr) {
    p->failed = p_.fanout->WriteChunks(req.ino, req.stripe, p->version,
                                       p->layout, to_write, write_error);
    return Status::Ok();
  }
  std::vector<ChunkWriteOp> ops;
  for (const auto& [i, bytes] : to_write) {
    ChunkWriteOp op;
    op.kind = ChunkWriteOp::Kind::kWrite;
    op.id = {req.ino, req.stripe, static_cast<uint32_t>(i)};
    op.to_version = p->version;
    op.bytes = bytes;
    ops.push_back(op);
  }
  p->failed = SendOps(p, std::move(ops), write_error);
  return Status::Ok();
}

Status StripeWriteExecutor::Prepare(const StripeWriteRequest& req,
                                    bool last_attempt, Prepared* out,
                                    bool* retry, Wave* wave, size_t member) {
  *retry = false;
  *out = Prepared{};
  out->req = &req;
  out->wave = wave;
  out->member = member;
  auto cur = CommittedBase(req);
  if (!cur.ok()) return cur.status();
  out->exists = cur->has_value();
  if (out->exists) out->base = **cur;
  if (req.zero_from != kNoTruncate && !out->exists) {
    out->skip = true;  // a hole stays a hole
    return Status::Ok();
  }
  out->plan = PlanStripeWrite(geo_, options_.parity_delta,
                              out->exists ? &out->base : nullptr, req);
  out->layout = p_.view->LayoutFor(req.ino, req.stripe);
  STRIPEFS_ASSIGN_OR_RETURN(out->version, NextVersion());

  Status write_error;
  Status made = out->plan.kind == WriteKind::kDelta
                    ? MakeDelta(out, &write_error)
                    : MakeEncoded(out, &write_error);
  if (!made.ok()) {
    // Reading the base failed: another client may have committed (and
    // collected our base) meanwhile.
    if (!last_attempt && out->exists && MovedOn(req.ino, out->base)) {
      *retry = true;
      return Status::Ok();
    }
    return made.Annotate(out->plan.kind == WriteKind::kDelta
                             ? "parity-delta read"
                             : "read-modify-write");
  }
  // KeepWorseError ranks ENOSPC first: set when any chunk was refused so.
  out->nospace = out->failed != 0 && write_error.code() == ENOSPC;
  const bool refuse = out->nospace && options_.refuse_degraded_enospc;
  if (!refuse && static_cast<uint32_t>(Popcount(out->failed)) <= geo_.m())
    return Status::Ok();
  if (refuse && static_cast<uint32_t>(Popcount(out->failed)) <= geo_.m()) {
    // Would commit degraded for lack of space, and the user said no.
    Abandon(*out);
    ClientCounters::Add(p_.counters->degraded_refused);
    return Status(ENOSPC, StripeName(req.ino, req.stripe) + ": " +
                              std::to_string(Popcount(out->failed)) +
                              " chunk writes refused for space; not committed "
                              "degraded (degraded_writes=refuse), previous "
                              "data kept (" +
                              write_error.ToString() + ")");
  }
  // Remove what did land of the new version; the old one stays.
  Abandon(*out);
  if (!last_attempt) {
    // Servers may have come back since our map was read; patches and
    // clones start from the old version, which another client may have
    // replaced and collected meanwhile.
    auto map_changed = p_.view->RefreshIfChanged();
    if ((map_changed.ok() && *map_changed) ||
        (out->exists && MovedOn(req.ino, out->base))) {
      *retry = true;
      return Status::Ok();
    }
  }
  ClientCounters::Add(p_.counters->failed_writes);
  return Status(
      write_error.code() == ENOSPC ? ENOSPC : EIO,
      StripeName(req.ino, req.stripe) + ": " +
          std::to_string(Popcount(out->failed)) +
          " chunk writes failed, at most " + std::to_string(geo_.m()) +
          " tolerated; previous data kept (" + write_error.ToString() + ")");
}

void StripeWriteExecutor::Abandon(const Prepared& p) {
  p_.fanout->DeleteVersion(p.req->ino, p.req->stripe, p.version, p.layout,
                           ~p.failed);
}

void StripeWriteExecutor::Committed(const Prepared& p) {
  p_.maps->Committed(p.req->ino,
                     {p.req->stripe, p.version, p.failed, p.plan.chunk_len});
  switch (p.plan.kind) {
    case WriteKind::kFull:
      ClientCounters::Add(p_.counters->full_stripe_writes);
      break;
    case WriteKind::kNewPartial:
      ClientCounters::Add(p_.counters->new_partial_stripes);
      break;
    case WriteKind::kRmw:
      ClientCounters::Add(p_.counters->rmw_stripes);
      break;
    case WriteKind::kDelta:
      ClientCounters::Add(p_.counters->parity_delta_updates);
      break;
  }
  if (p.failed != 0) {
    ClientCounters::Add(p_.counters->degraded_writes);
    // Space refusals heal once space returns; a server that was down is
    // for `stripefs repair` once it is back or marked out (docs/backend.md).
    if (p_.degraded && p.nospace)
      p_.degraded->Note(p.req->ino,
                        {p.req->stripe, p.version, p.failed, p.plan.chunk_len});
  }
}

Status StripeWriteExecutor::Commit(uint64_t ino,
                                   const std::vector<StripeCommit>& commits,
                                   uint64_t min_file_size,
                                   std::vector<ObsoleteStripe>* obsolete) {
  if (KeepTimes()) {
    Status st =
        p_.meta->CommitStripesKeepTimes(ino, commits, min_file_size, obsolete);
    if (st.code() != EOPNOTSUPP) return st;
  }
  return p_.meta->CommitStripes(ino, commits, min_file_size, obsolete);
}

Status StripeWriteExecutor::Write(const StripeWriteRequest& req) {
  STRIPEFS_RETURN_IF_ERROR(ValidateWriteRequest(geo_, req));
  ObsoleteStripe obsolete;
  ChunkLayout layout;
  {
    std::lock_guard<std::mutex> lock(p_.locks->For(req.ino, req.stripe));
    bool done = false;
    for (int attempt = 0; attempt <= options_.commit_retries && !done;
         ++attempt) {
      Prepared p;
      bool retry = false;
      STRIPEFS_RETURN_IF_ERROR(
          Prepare(req, attempt == options_.commit_retries, &p, &retry));
      if (retry) continue;
      if (p.skip) return Status::Ok();
      const StripeVersion sv{req.stripe, p.version, p.failed, p.plan.chunk_len};
      const uint64_t expected = p.exists ? p.base.version : 0;
      const bool keep = KeepTimes();
      Status st;
      if (keep) {
        std::vector<ObsoleteStripe> replaced;
        st = Commit(req.ino, {StripeCommit{sv, expected}}, req.min_file_size,
                    &replaced);
        if (st.ok() && !replaced.empty()) obsolete = replaced.front();
      }
      if (!keep || st.code() == EOPNOTSUPP) {
        st = p_.meta->CommitStripe(req.ino, sv, expected, req.min_file_size,
                                   &obsolete);
      }
      if (st.code() == ESTALE) {
        ClientCounters::Add(p_.counters->commit_conflicts);
        Abandon(p);
        Stale(req.ino);
        continue;
      }
      if (!st.ok()) return st.Annotate("committing stripe");
      Committed(p);
      layout = std::move(p.layout);
      done = true;
    }
    if (!done) {
      return Status(EAGAIN, StripeName(req.ino, req.stripe) +
                                ": too many concurrent writers, gave up");
    }
  }
  // Outside the stripe lock: the collector may need it.
  p_.collector->Enqueue(obsolete, layout, /*dropped=*/false);
  return Status::Ok();
}

Status StripeWriteExecutor::ReadDeltaWindows(
    Prepared* p, std::span<const StripeReader::WindowRead> reads) {
  const StripeWriteRequest& req = *p->req;
  if (p->wave != nullptr) {
    std::vector<ChunkFanout::BatchRead> items;
    items.reserve(reads.size());
    for (const StripeReader::WindowRead& r : reads) {
      ChunkService* svc = p_.reader->DirectSource(p->base, p->layout, r.index);
      if (svc == nullptr) break;
      items.push_back({svc,
                       {ChunkId{req.ino, req.stripe, r.index}, p->base.version,
                        r.lo, std::span<uint8_t>(r.dst, r.hi - r.lo)}});
    }
    if (items.size() == reads.size()) {
      const std::vector<Status> got = p->wave->reads.Hand(p->member, items);
      if (std::all_of(got.begin(), got.end(),
                      [](const Status& st) { return st.ok(); }))
        return Status::Ok();
      // Read again below, around what failed.
    } else {
      p->wave->reads.Leave(p->member);
    }
  }
  return p_.reader->ReadWindows(req.ino, p->base, p->layout, reads);
}

uint32_t StripeWriteExecutor::SendOps(Prepared* p,
                                      std::vector<ChunkWriteOp> ops,
                                      Status* error) {
  std::vector<int> indices;
  for (const ChunkWriteOp& op : ops)
    indices.push_back(static_cast<int>(op.id.index));
  std::vector<Status> errs;
  std::vector<ChunkFanout::BatchOp> batch;
  for (const ChunkWriteOp& op : ops) batch.push_back({&p->layout, op});
  if (p->wave != nullptr) {
    errs = p->wave->Write(p->member, batch);
  } else {
    errs = p_.fanout->RunBatch(batch);
  }
  return p_.fanout->Reduce(indices, errs, error);
}

void StripeWriteExecutor::PrepareWave(
    const std::vector<StripeWriteRequest>& reqs, size_t begin, size_t end,
    std::vector<Prepared>* prepared, std::vector<Status>* made,
    std::vector<char>* retry) {
  // One thread per stripe of the wave, all at once (members wait for each
  // other; kept between waves by wave_threads_). Every stripe reads first
  // (the deltas' old windows together, one ReadChunkRanges request per
  // chunk server); then the last to be ready sends all their chunk writes, one
  // request per chunk server, so each server's group commit covers the whole
  // wave with one data and one index sync.
  Wave wave(p_.fanout, p_.reader, end - begin);
  std::vector<std::function<void()>> members;
  for (size_t j = begin; j < end; ++j) {
    members.emplace_back([&, j] {
      bool again = false;
      (*made)[j] = Prepare(reqs[j], /*last_attempt=*/false, &(*prepared)[j],
                           &again, &wave, j - begin);
      (*retry)[j] = again;
      wave.Leave(j - begin);  // failed, skipped or retried before sending
    });
  }
  wave_threads_.RunAll(std::move(members));
}

Status StripeWriteExecutor::WriteMany(
    const std::vector<StripeWriteRequest>& reqs) {
  if (reqs.size() == 1) return Write(reqs[0]);
  if (reqs.empty()) return Status::Ok();
  const uint64_t ino = reqs[0].ino;
  std::vector<uint64_t> stripes;
  for (const auto& r : reqs) {
    if (r.ino != ino) return Status::InvalidArgument("WriteMany of two files");
    STRIPEFS_RETURN_IF_ERROR(ValidateWriteRequest(geo_, r));
    stripes.push_back(r.stripe);
  }
  WarmMap(ino, *std::min_element(stripes.begin(), stripes.end()),
          *std::max_element(stripes.begin(), stripes.end()));
  std::vector<Prepared> prepared(reqs.size());
  std::vector<const StripeWriteRequest*> redo;  // done one by one
  std::vector<std::pair<ObsoleteStripe, ChunkLayout>> collect;
  {
    StripeLocks::Group locks(p_.locks, ino, stripes);
    std::vector<Status> made(reqs.size());
    std::vector<char> retry(reqs.size(), 0);
    const size_t wave = std::max<size_t>(options_.parallel_stripes, 1);
    for (size_t first = 0; first < reqs.size();) {
      // A wave: at least one stripe, then while stripes and bytes fit.
      auto new_bytes = [&](size_t j) {
        uint64_t n = 0;
        for (const StripeRange& r : reqs[j].ranges) n += r.end - r.begin;
        return n;
      };
      size_t last = first + 1;
      uint64_t bytes = new_bytes(first);
      while (last < reqs.size() && last - first < wave &&
             bytes + new_bytes(last) <= options_.wave_bytes) {
        bytes += new_bytes(last);
        ++last;
      }
      PrepareWave(reqs, first, last, &prepared, &made, &retry);
      first = last;
    }
    Status failed;
    for (const Status& st : made)
      if (!st.ok() && failed.ok()) failed = st;
    std::vector<StripeCommit> commits;
    std::vector<size_t> committing;  // indices into prepared
    uint64_t min_size = 0;
    for (size_t j = 0; j < reqs.size(); ++j) {
      if (!made[j].ok()) continue;
      if (retry[j]) {
        redo.push_back(&reqs[j]);
        continue;
      }
      if (prepared[j].skip) continue;
      const Prepared& p = prepared[j];
      StripeCommit commit;
      commit.sv = {reqs[j].stripe, p.version, p.failed, p.plan.chunk_len};
      commit.expected_version = p.exists ? p.base.version : 0;
      commits.push_back(commit);
      committing.push_back(j);
      min_size = std::max(min_size, reqs[j].min_file_size);
    }
    if (!failed.ok()) {
      // All or nothing: none of the batch commits.
      for (size_t i : committing) Abandon(prepared[i]);
      return failed;
    }
    std::vector<ObsoleteStripe> obsolete;
    Status st = commits.empty() ? Status::Ok()
                                : Commit(ino, commits, min_size, &obsolete);
    if (st.code() == ESTALE) {
      // All or nothing: another client committed one of them; redo each.
      ClientCounters::Add(p_.counters->commit_conflicts);
      Stale(ino);
      for (size_t i : committing) {
        Abandon(prepared[i]);
        redo.push_back(prepared[i].req);
      }
    } else if (st.code() == EOPNOTSUPP) {
      // A metadata service without batch commits: commit one by one.
      for (size_t n = 0; n < committing.size(); ++n) {
        const Prepared& p = prepared[committing[n]];
        ObsoleteStripe o;
        Status one = p_.meta->CommitStripe(ino, commits[n].sv,
                                           commits[n].expected_version,
                                           p.req->min_file_size, &o);
        if (one.code() == ESTALE) {
          ClientCounters::Add(p_.counters->commit_conflicts);
          Abandon(p);
          Stale(ino);
          redo.push_back(p.req);
          continue;
        }
        if (!one.ok()) return one.Annotate("committing stripe");
        Committed(p);
        collect.emplace_back(o, p.layout);
      }
    } else if (!st.ok()) {
      return st.Annotate("committing stripes");
    } else {
      for (size_t n = 0; n < committing.size(); ++n) {
        const Prepared& p = prepared[committing[n]];
        Committed(p);
        collect.emplace_back(obsolete[n], p.layout);
      }
    }
  }
  for (const auto& [o, layout] : collect)
    p_.collector->Enqueue(o, layout, /*dropped=*/false);
  for (const StripeWriteRequest* r : redo) STRIPEFS_RETURN_IF_ERROR(Write(*r));
  return Status::Ok();
}

}  // namespace stripefs

#include "backend/client/stripe_read.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <latch>
#include <memory>
#include <mutex>
#include <string>

#include "backend/client/chunk_fanout.h"

namespace stripefs {

namespace {

uint32_t Bit(int i) { return ChunkBit(static_cast<uint32_t>(i)); }

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

Status StripeReader::ReadColumns(uint64_t ino, const StripeVersion& sv,
                                 const ChunkLayout& layout,
                                 const std::vector<int>& want, uint32_t lo,
                                 uint32_t hi,
                                 std::vector<std::vector<uint8_t>>* out) {
  return ReadColumnsAround(ino, sv, layout, want, lo, hi, out, {});
}

Status StripeReader::ReadWindows(uint64_t ino, const StripeVersion& sv,
                                 const ChunkLayout& layout,
                                 std::span<const WindowRead> reads) {
  if (reads.empty()) return Status::Ok();
  if (reads.size() > kMaxCells) {
    // One round per kMaxCells windows.
    for (size_t at = 0; at < reads.size(); at += kMaxCells) {
      STRIPEFS_RETURN_IF_ERROR(ReadWindows(
          ino, sv, layout,
          reads.subspan(at, std::min(kMaxCells, reads.size() - at))));
    }
    return Status::Ok();
  }
  std::vector<CellRead> cells;
  cells.reserve(reads.size());
  for (size_t j = 0; j < reads.size(); ++j) {
    const WindowRead& r = reads[j];
    bool overlaps = false;
    for (size_t i = 0; i < j; ++i)
      overlaps |=
          reads[i].index == r.index && reads[i].lo < r.hi && r.lo < reads[i].hi;
    if (r.index >= geo_.width() || r.lo >= r.hi || overlaps)
      return Status::InvalidArgument(
          "ReadWindows: bad or overlapping window of chunk " +
          std::to_string(r.index));
    cells.push_back({CellSpan{r.index, r.lo, r.hi}, r.dst});
  }
  std::vector<Status> known;  // per chunk index, once a read failed
  if (ReadCellsInto(ino, sv, layout, cells, &known) == CellsOutcome::kRead)
    return Status::Ok();
  // The general path, one ReadColumns per distinct window.
  std::vector<bool> done(reads.size(), false);
  for (size_t first = 0; first < reads.size(); ++first) {
    if (done[first]) continue;
    const uint32_t lo = reads[first].lo, hi = reads[first].hi;
    std::vector<size_t> group;
    std::vector<int> want;
    for (size_t j = first; j < reads.size(); ++j) {
      if (done[j] || reads[j].lo != lo || reads[j].hi != hi) continue;
      group.push_back(j);
      want.push_back(static_cast<int>(reads[j].index));
    }
    std::vector<std::vector<uint8_t>> got;  // parallel to `want`
    STRIPEFS_RETURN_IF_ERROR(
        ReadColumnsAround(ino, sv, layout, want, lo, hi, &got, known));
    for (size_t g = 0; g < group.size(); ++g) {
      std::memcpy(reads[group[g]].dst, got[g].data(), hi - lo);
      done[group[g]] = true;
    }
  }
  return Status::Ok();
}

namespace {

// The chunk reads of one ReadColumnsAround call: started on the pool (the
// wanted chunks first), harvested as they finish, hedged when the read
// deadline passes (reads past it stop counting and other chunks are read
// to reconstruct around them), until every wanted chunk or any k chunks
// are read. Lives on ReadColumnsAround's stack; the ChunkReads it shares
// with the running tasks outlives it.
class HedgedColumnRead {
 public:
  struct Setup {
    uint64_t ino;
    const StripeVersion& sv;
    const ChunkLayout& layout;
    int k, n;
    uint32_t lo, len;
    std::chrono::milliseconds deadline;  // 0: no deadline, no hedging
    ClientCounters& counters;
    ClusterView& view;
    ThreadPool& pool;
  };
  HedgedColumnRead(const Setup& s, const std::vector<int>& want,
                   std::span<const Status> known)
      : s_(s),
        use_deadline_(s.deadline.count() > 0),
        reads_(std::make_shared<ChunkReads>(static_cast<size_t>(s.n))),
        errs_(static_cast<size_t>(s.n)),
        failed_(s.sv.missing_mask) {
    for (int i : want) want_mask_ |= Bit(i);
    for (size_t u = 0; u < known.size() && u < errs_.size(); ++u) {
      if (known[u].ok()) continue;
      errs_[u] = known[u];  // failed already (and counted) by ReadCellsInto
      failed_ |= Bit(static_cast<int>(u));
    }
    // First the wanted chunks themselves (skipping known-missing ones).
    for (int i : want)
      if (!(failed_ & Bit(i))) Launch(i);
  }

  // Waits until every wanted chunk or k chunks are read; then the buffers
  // of the chunks read (empty for the others). EIO naming the worst error
  // when too few chunks can be read.
  Result<std::vector<std::vector<uint8_t>>> Run();
  uint32_t have() const { return have_; }

 private:
  using Clock = std::chrono::steady_clock;
  // Starts reading chunk i on the pool (or fails it at once when its
  // server is down or unknown).
  void Launch(int i);
  // Accounts for the reads finished since the last call (lock held).
  void Harvest();
  // The deadline passed: stop counting on the reads still running (they
  // may still win) and mark their servers suspect.
  void GiveUpOnCounted();
  // Some wanted chunk failed or is slow: makes sure k reads are done or
  // running (and counted on), data chunks first. False when that is
  // impossible and nothing is running any more.
  bool LaunchSpares();
  Status Unreadable() const;
  // The buffers of the chunks read; reads still running are abandoned
  // (their results land in `reads_`, which they keep alive). Lock held.
  std::vector<std::vector<uint8_t>> TakeBuffers();

  const Setup s_;
  const bool use_deadline_;
  std::shared_ptr<ChunkReads> reads_;
  std::vector<Status> errs_;  // why a chunk failed
  uint32_t want_mask_ = 0;
  uint32_t launched_ = 0;   // reads started
  uint32_t harvested_ = 0;  // reads finished and accounted for
  uint32_t have_ = 0;       // chunks read
  uint32_t failed_;
  uint32_t counted_ = 0;  // running reads not yet past their deadline
  uint32_t slow_ = 0;     // reads that passed the deadline
  bool transport_error_ = false;
};

void HedgedColumnRead::Launch(int i) {
  const size_t u = static_cast<size_t>(i);
  ChunkService* svc = s_.layout.Usable(u, &errs_[u]);
  if (svc == nullptr) {
    failed_ |= Bit(i);
    ClientCounters::Add(s_.counters.chunk_read_errors);
    return;
  }
  launched_ |= Bit(i);
  if (use_deadline_ && s_.view.IsSuspect(s_.layout.servers[u].id)) {
    // Recently slow or unreachable: ask, but read around it at once.
    ClientCounters::Add(s_.counters.hedged_chunk_reads);
  } else {
    counted_ |= Bit(i);
  }
  const ChunkId id{s_.ino, s_.sv.stripe, static_cast<uint32_t>(i)};
  const uint64_t version = s_.sv.version;
  const uint32_t lo = s_.lo, len = s_.len;
  s_.pool.Submit([reads = reads_, svc, id, version, lo, len, i, u] {
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
}

void HedgedColumnRead::Harvest() {
  const uint32_t fresh = reads_->done & ~harvested_;
  harvested_ |= fresh;
  counted_ &= ~harvested_;
  for (int i = 0; i < s_.n; ++i) {
    if (!(fresh & Bit(i))) continue;
    const size_t u = static_cast<size_t>(i);
    if (reads_->errs[u].ok()) {
      have_ |= Bit(i);
      if (use_deadline_) s_.view.MarkSuspect(s_.layout.servers[u].id, false);
      continue;
    }
    errs_[u] = reads_->errs[u];
    failed_ |= Bit(i);
    ClientCounters::Add(s_.counters.chunk_read_errors);
    if (errs_[u].code() == EBADMSG) ClientCounters::Add(s_.counters.crc_errors);
    if (errs_[u].code() == EHOSTDOWN || errs_[u].code() == ETIMEDOUT) {
      transport_error_ = true;
      if (use_deadline_) s_.view.MarkSuspect(s_.layout.servers[u].id, true);
    }
  }
}

void HedgedColumnRead::GiveUpOnCounted() {
  ClientCounters::Add(s_.counters.slow_chunk_reads,
                      static_cast<uint64_t>(__builtin_popcount(counted_)));
  for (int i = 0; i < s_.n; ++i)
    if (counted_ & Bit(i))
      s_.view.MarkSuspect(s_.layout.servers[static_cast<size_t>(i)].id, true);
  slow_ |= counted_;
  counted_ = 0;
}

bool HedgedColumnRead::LaunchSpares() {
  int expect = __builtin_popcount(have_ | counted_);
  for (int i = 0; i < s_.n && expect < s_.k; ++i) {
    if ((launched_ | failed_) & Bit(i)) continue;
    Launch(i);
    if (launched_ & Bit(i)) ++expect;
  }
  return expect >= s_.k || (launched_ & ~harvested_) != 0;
}

Status HedgedColumnRead::Unreadable() const {
  Status why;
  for (const Status& e : errs_) KeepWorseError(&why, e);
  return Status::IoError("stripe " + std::to_string(s_.sv.stripe) +
                         " of inode " + std::to_string(s_.ino) + ": only " +
                         std::to_string(__builtin_popcount(have_)) + " of " +
                         std::to_string(s_.n) + " chunks readable, need " +
                         std::to_string(s_.k) +
                         (why.ok() ? "" : " (" + why.ToString() + ")"));
}

std::vector<std::vector<uint8_t>> HedgedColumnRead::TakeBuffers() {
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(s_.n));
  for (int i = 0; i < s_.n; ++i)
    if (have_ & Bit(i))
      bufs[static_cast<size_t>(i)] =
          std::move(reads_->bufs[static_cast<size_t>(i)]);
  return bufs;
}

Result<std::vector<std::vector<uint8_t>>> HedgedColumnRead::Run() {
  auto round_end = Clock::now() + s_.deadline;
  std::unique_lock<std::mutex> lock(reads_->mu);
  for (;;) {
    Harvest();
    if ((want_mask_ & ~have_) == 0) break;         // all wanted chunks read
    if (__builtin_popcount(have_) >= s_.k) break;  // enough to rebuild
    if (use_deadline_ && Clock::now() >= round_end) {
      GiveUpOnCounted();
      round_end = Clock::now() + s_.deadline;
    }
    if ((want_mask_ & ~(have_ | counted_)) != 0 && !LaunchSpares()) {
      lock.unlock();
      if (transport_error_) s_.view.RequestRefresh();
      return Unreadable();
    }
    if (use_deadline_ && counted_ != 0) {
      reads_->cv.wait_until(lock, round_end);
    } else {
      reads_->cv.wait(lock);  // each running read ends by its own timeout
    }
  }
  std::vector<std::vector<uint8_t>> bufs = TakeBuffers();
  const uint32_t abandoned = launched_ & ~harvested_;
  lock.unlock();
  if (abandoned != 0) {
    ClientCounters::Add(s_.counters.abandoned_chunk_reads,
                        static_cast<uint64_t>(__builtin_popcount(abandoned)));
  }
  if (transport_error_ || slow_ != 0) s_.view.RequestRefresh();
  return bufs;
}

}  // namespace

Status StripeReader::ReadColumnsAround(uint64_t ino, const StripeVersion& sv,
                                       const ChunkLayout& layout,
                                       const std::vector<int>& want,
                                       uint32_t lo, uint32_t hi,
                                       std::vector<std::vector<uint8_t>>* out,
                                       std::span<const Status> known) {
  const int n = static_cast<int>(geo_.width());
  const uint32_t len = hi - lo;
  HedgedColumnRead reads(
      {ino, sv, layout, static_cast<int>(geo_.k()), n, lo, len, read_deadline_,
       *p_.counters, *p_.view, *p_.pool},
      want, known);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::vector<uint8_t>> bufs,
                            reads.Run());
  const uint32_t have = reads.have();
  uint32_t want_mask = 0;
  for (int i : want) want_mask |= Bit(i);
  const uint32_t lost = want_mask & ~have;
  if (lost != 0) {
    ClientCounters::Add(p_.counters->degraded_reads);
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
        p_.codec->Reconstruct(ptrs, erased, len, unavailable));
  }
  out->clear();
  for (int i : want) out->push_back(std::move(bufs[static_cast<size_t>(i)]));
  return Status::Ok();
}

ChunkService* StripeReader::DirectSource(const StripeVersion& sv,
                                         const ChunkLayout& layout,
                                         uint32_t index) const {
  Status why;
  ChunkService* svc = layout.Usable(index, &why);
  if (svc == nullptr || (sv.missing_mask & ChunkBit(index))) return nullptr;
  if (read_deadline_.count() > 0 &&
      p_.view->IsSuspect(layout.servers[index].id))
    return nullptr;
  return svc;
}

std::chrono::steady_clock::time_point StripeReader::DirectDeadline() const {
  using Clock = std::chrono::steady_clock;
  return read_deadline_.count() > 0 ? Clock::now() + read_deadline_
                                    : Clock::time_point::max();
}

StripeReader::CellsOutcome StripeReader::ReadCellsInto(
    uint64_t ino, const StripeVersion& sv, const ChunkLayout& layout,
    std::span<const CellRead> cells, std::vector<Status>* known) {
  using Clock = std::chrono::steady_clock;
  if (cells.empty()) return CellsOutcome::kRead;
  const bool use_deadline = read_deadline_.count() > 0;
  ClusterView& view = *p_.view;
  // Fixed arrays: no heap allocation per READ (at most kMaxCells cells).
  if (cells.size() > kMaxCells) return CellsOutcome::kNotTried;
  std::array<ChunkService*, kMaxCells> svcs{};
  for (size_t j = 0; j < cells.size(); ++j) {
    // Missing, down or recently slow chunks: the general path reads
    // around them at once.
    svcs[j] = DirectSource(sv, layout, cells[j].span.cell);
    if (svcs[j] == nullptr) return CellsOutcome::kNotTried;
  }
  const Clock::time_point deadline = DirectDeadline();
  std::array<Status, kMaxCells> st;
  auto read = [&](size_t j) {
    const CellRead& c = cells[j];
    st[j] = svcs[j]->ReadChunkIntoBy(
        ChunkId{ino, sv.stripe, c.span.cell}, sv.version, c.span.lo,
        std::span<uint8_t>(c.dst, c.span.hi - c.span.lo), deadline);
  };
  // All but the last on the pool, the last on this thread. Every read ends
  // by the deadline, so waiting for them all is bounded and none touches
  // its buffer after we return.
  std::latch done(static_cast<std::ptrdiff_t>(cells.size() - 1));
  for (size_t j = 0; j + 1 < cells.size(); ++j) {
    p_.pool->Submit([&read, &done, j] {
      read(j);
      done.count_down();
    });
  }
  read(cells.size() - 1);
  done.wait();

  ClientCounters& counters = *p_.counters;
  CellsOutcome outcome = CellsOutcome::kRead;
  bool refresh = false;
  for (size_t j = 0; j < cells.size(); ++j)
    if (st[j].code() == EOPNOTSUPP) return CellsOutcome::kNotTried;
  for (size_t j = 0; j < cells.size(); ++j) {
    if (st[j].ok()) continue;
    const size_t u = cells[j].span.cell;
    if (known->empty()) known->assign(geo_.width(), Status::Ok());
    outcome = CellsOutcome::kFailed;
    (*known)[u] = st[j];
    ClientCounters::Add(counters.chunk_read_errors);
    if (st[j].code() == EBADMSG) ClientCounters::Add(counters.crc_errors);
    if (st[j].code() == ETIMEDOUT && use_deadline && Clock::now() >= deadline) {
      ClientCounters::Add(counters.slow_chunk_reads);
    }
    if (st[j].code() == EHOSTDOWN || st[j].code() == ETIMEDOUT) {
      refresh = true;
      if (use_deadline) view.MarkSuspect(layout.servers[u].id, true);
    }
  }
  if (refresh) view.RequestRefresh();
  return outcome;
}

Result<size_t> StripeReader::Read(uint64_t ino, uint64_t offset,
                                  std::span<uint8_t> out, uint64_t file_size) {
  if (offset >= file_size || out.empty()) return size_t{0};
  const uint64_t total = std::min<uint64_t>(out.size(), file_size - offset);
  const uint64_t S = geo_.stripe_size();
  const uint64_t first = offset / S, last = (offset + total - 1) / S;
  auto stripes = StripeMap(ino, first, last, file_size);
  if (!stripes.ok()) return stripes.status().Annotate("reading stripe map");
  ReadAheadAfter(ino, offset, total, file_size);
  STRIPEFS_RETURN_IF_ERROR(ForEachStripeRead(
      offset, total, *stripes, out,
      [&](const StripeVersion& sv, uint64_t a, uint64_t b, uint8_t* dst) {
        return ReadStripeCached(ino, sv, a, b, dst);
      }));
  ClientCounters::Add(p_.counters->bytes_read, total);
  return static_cast<size_t>(total);
}

void StripeReader::ReadAheadAfter(uint64_t ino, uint64_t offset, uint64_t total,
                                  uint64_t file_size) {
  if (read_ahead_stripes_ == 0 || !Sequential(ino, offset, offset + total))
    return;
  const uint64_t S = geo_.stripe_size();
  const uint64_t last = (offset + total - 1) / S;
  const uint64_t file_last = (file_size - 1) / S;
  const uint64_t from = (offset + total) % S ? last : last + 1;
  const uint64_t to = std::min(file_last, last + read_ahead_stripes_);
  if (from <= to) ReadAhead(ino, from, to);
}

Status StripeReader::ForEachStripeRead(
    uint64_t offset, uint64_t total, const std::vector<StripeVersion>& stripes,
    std::span<uint8_t> out, const StripeRead& read) {
  size_t next = 0;  // index into stripes
  Status st;
  geo_.ForEachStripe(
      offset, total, [&](uint64_t s, uint32_t off, uint64_t pos, uint64_t n) {
        if (!st.ok()) return;
        while (next < stripes.size() && stripes[next].stripe < s) ++next;
        uint8_t* dst = out.data() + pos;
        if (next == stripes.size() || stripes[next].stripe != s) {
          std::memset(dst, 0, n);  // a hole
          return;
        }
        const StripeVersion& sv = stripes[next];
        // Every byte of a full stripe is read; a short one (chunk_len below
        // the cell size) reads as zeros past its stored columns. Zeroing
        // only then spares a 1 MiB READ a 1 MiB memset.
        if (sv.chunk_len < geo_.cell_size()) std::memset(dst, 0, n);
        st = read(sv, off, off + n, dst);
      });
  return st;
}

Result<size_t> StripeReader::TryRead(uint64_t ino, uint64_t offset,
                                     std::span<uint8_t> out,
                                     uint64_t file_size) {
  if (offset >= file_size || out.empty()) return size_t{0};
  const uint64_t total = std::min<uint64_t>(out.size(), file_size - offset);
  const uint64_t S = geo_.stripe_size();
  const uint64_t first = offset / S, last = (offset + total - 1) / S;
  std::vector<StripeVersion> stripes;
  if (!p_.maps->Lookup(ino, first, last - first + 1, &stripes,
                       StripeMapCache::Use::kRead)) {
    return Status::WouldBlock("stripe map not cached");
  }
  STRIPEFS_RETURN_IF_ERROR(ForEachStripeRead(
      offset, total, stripes, out,
      [&](const StripeVersion& sv, uint64_t a, uint64_t b, uint8_t* dst) {
        return TryReadStripe(ino, sv, a, b, dst);
      }));
  // Served: from here on as Read does (stream state, read-ahead queued).
  ReadAheadAfter(ino, offset, total, file_size);
  ClientCounters::Add(p_.counters->bytes_read, total);
  return static_cast<size_t>(total);
}

Status StripeReader::TryReadStripe(uint64_t ino, const StripeVersion& sv,
                                   uint64_t a, uint64_t b, uint8_t* dst) {
  if (p_.stripes) {
    const StripeDataCache::Key key{ino, sv.stripe, sv.version};
    if (auto load = p_.stripes->Find(key)) {
      if (load->wait_for(std::chrono::seconds(0)) !=
          std::future_status::ready) {
        return Status::WouldBlock("stripe is being loaded");
      }
      if (const CachedStripePtr& c = load->get()) {
        ClientCounters::Add(p_.counters->stripe_cache_hits);
        CopyOut(*c, a, b, dst);
        return Status::Ok();
      }
      // A load that failed: the chunks, as Read does.
    }
  }
  // Degraded stripes are reconstructed (and cached) by Read.
  if (Degraded(ino, sv)) return Status::WouldBlock("degraded stripe");
  const auto shared_layout = p_.view->SharedLayoutFor(ino, sv.stripe);
  const ChunkLayout& layout = *shared_layout;
  Status st;
  geo_.ForEachCell(a, b, sv.chunk_len, [&](const CellSpan& span) {
    if (!st.ok()) return;
    ChunkService* svc = DirectSource(sv, layout, span.cell);
    if (svc == nullptr) {
      st = Status::WouldBlock("chunk not directly readable");
      return;
    }
    Status r = svc->TryReadChunkInto(
        ChunkId{ino, sv.stripe, span.cell}, sv.version, span.lo,
        std::span<uint8_t>(dst + (geo_.StripeOffset(span.cell, span.lo) - a),
                           span.hi - span.lo));
    // Any error too: Read asks again, reads around it and counts it.
    if (!r.ok()) st = Status::WouldBlock("chunk read would block");
  });
  return st;
}

bool StripeReader::Sequential(uint64_t ino, uint64_t offset, uint64_t end) {
  constexpr size_t kMaxStreams = 4096;
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto it = next_offset_.find(ino);
  const bool seq = it != next_offset_.end() && it->second == offset;
  if (it == next_offset_.end()) {
    if (next_offset_.size() >= kMaxStreams) next_offset_.clear();
    next_offset_.emplace(ino, end);
  } else {
    it->second = end;
  }
  return seq;
}

bool StripeReader::Degraded(uint64_t ino, const StripeVersion& sv) const {
  const uint32_t data_mask = (1u << geo_.k()) - 1;
  if (sv.missing_mask & data_mask) return true;
  if (p_.view->AllUp()) return false;
  const auto shared_layout = p_.view->SharedLayoutFor(ino, sv.stripe);
  const ChunkLayout& layout = *shared_layout;
  for (uint32_t i = 0; i < geo_.k(); ++i) {
    if ((sv.missing_mask & ChunkBit(i)) || !layout.IsUp(i)) return true;
  }
  return false;
}

CachedStripePtr StripeReader::LoadStripe(uint64_t ino,
                                         const StripeVersion& sv) {
  auto c = std::make_shared<CachedStripe>();
  c->chunk_len = sv.chunk_len;
  if (sv.chunk_len == 0) return c;
  const auto shared_layout = p_.view->SharedLayoutFor(ino, sv.stripe);
  const ChunkLayout& layout = *shared_layout;
  p_.stripes->Allocate(c.get(), size_t{geo_.k()} * sv.chunk_len);
  // Every data column straight into place; the general path (vectors,
  // reconstruction) only when that is not possible or fails.
  std::vector<CellRead> cells;
  for (uint32_t i = 0; i < geo_.k(); ++i)
    cells.push_back(
        {CellSpan{i, 0, sv.chunk_len}, c->bytes() + size_t{i} * sv.chunk_len});
  std::vector<Status> known;
  CellsOutcome got = ReadCellsInto(ino, sv, layout, cells, &known);
  if (got == CellsOutcome::kNotTried)
    got = ReadDataAround(ino, sv, layout, c->bytes(), &known);
  if (got == CellsOutcome::kRead) return c;
  std::vector<int> want;
  for (uint32_t i = 0; i < geo_.k(); ++i) want.push_back(static_cast<int>(i));
  std::vector<std::vector<uint8_t>> cols;
  Status st =
      ReadColumnsAround(ino, sv, layout, want, 0, sv.chunk_len, &cols, known);
  if (!st.ok()) return nullptr;
  for (uint32_t i = 0; i < geo_.k(); ++i)
    std::memcpy(c->bytes() + size_t{i} * sv.chunk_len, cols[i].data(),
                sv.chunk_len);
  return c;
}

StripeReader::CellsOutcome StripeReader::ReadDataAround(
    uint64_t ino, const StripeVersion& sv, const ChunkLayout& layout,
    uint8_t* data, std::vector<Status>* known) {
  const uint32_t k = geo_.k(), n = geo_.width(), len = sv.chunk_len;
  std::vector<CellRead> cells;
  std::vector<int> lost, unavailable;
  for (uint32_t i = 0; i < k; ++i) {
    if (DirectSource(sv, layout, i) != nullptr) {
      cells.push_back({CellSpan{i, 0, len}, data + size_t{i} * len});
    } else {
      lost.push_back(static_cast<int>(i));
    }
  }
  if (lost.empty() || lost.size() > n - k) return CellsOutcome::kNotTried;
  // Written whole by the reads before it is read: no zero-fill.
  std::unique_ptr<uint8_t[]> scratch(new uint8_t[lost.size() * len]);
  size_t parity = 0;
  for (uint32_t i = k; i < n; ++i) {
    if (parity < lost.size() && DirectSource(sv, layout, i) != nullptr) {
      cells.push_back(
          {CellSpan{i, 0, len}, scratch.get() + parity * size_t{len}});
      ++parity;
    } else {
      unavailable.push_back(static_cast<int>(i));
    }
  }
  if (parity < lost.size()) return CellsOutcome::kNotTried;
  const CellsOutcome got = ReadCellsInto(ino, sv, layout, cells, known);
  if (got != CellsOutcome::kRead) return got;
  std::array<uint8_t*, kMaxCells> ptrs{};
  for (const CellRead& c : cells) ptrs[c.span.cell] = c.dst;
  for (int i : lost) ptrs[static_cast<size_t>(i)] = data + size_t(i) * len;
  Status st = p_.codec->Reconstruct(std::span<uint8_t* const>(ptrs.data(), n),
                                    lost, len, unavailable);
  // Cannot fail with k columns read: a failure is a bug; the general
  // path then reads the stripe again and reports it.
  if (!st.ok()) return CellsOutcome::kNotTried;
  ClientCounters::Add(p_.counters->degraded_reads);
  return CellsOutcome::kRead;
}

void StripeReader::CopyOut(const CachedStripe& c, uint64_t a, uint64_t b,
                           uint8_t* dst) const {
  geo_.ForEachCell(a, b, c.chunk_len, [&](const CellSpan& span) {
    std::memcpy(dst + (geo_.StripeOffset(span.cell, span.lo) - a),
                c.bytes() + size_t{span.cell} * c.chunk_len + span.lo,
                span.hi - span.lo);
  });
}

Status StripeReader::ReadStripeCached(uint64_t ino, const StripeVersion& sv,
                                      uint64_t a, uint64_t b, uint8_t* dst) {
  if (p_.stripes) {
    const StripeDataCache::Key key{ino, sv.stripe, sv.version};
    CachedStripePtr c;
    if (auto load = p_.stripes->Find(key)) {
      c = load->get();  // waits for a load in flight
    } else if (Degraded(ino, sv)) {
      auto promise =
          p_.stripes->Reserve(key, uint64_t{geo_.k()} * sv.chunk_len);
      if (promise) {
        CachedStripePtr loaded = LoadStripe(ino, sv);
        p_.stripes->Complete(key, promise, loaded);
        if (loaded) {
          ClientCounters::Add(p_.counters->degraded_stripe_loads);
          CopyOut(*loaded, a, b, dst);
          return Status::Ok();
        }
      }
    }
    if (c) {
      ClientCounters::Add(p_.counters->stripe_cache_hits);
      CopyOut(*c, a, b, dst);
      return Status::Ok();
    }
  }
  return ReadStripe(ino, sv, a, b, dst);
}

void StripeReader::ReadAhead(uint64_t ino, uint64_t from, uint64_t to) {
  std::vector<StripeVersion> svs;
  if (!p_.maps->Lookup(ino, from, to - from + 1, &svs)) return;
  for (const StripeVersion& sv : svs) {
    const StripeDataCache::Key key{ino, sv.stripe, sv.version};
    auto promise = p_.stripes->Reserve(key, uint64_t{geo_.k()} * sv.chunk_len);
    if (!promise) continue;  // loaded, loading, or no room
    ClientCounters::Add(p_.counters->read_ahead_loads);
    if (Degraded(ino, sv))
      ClientCounters::Add(p_.counters->degraded_stripe_loads);
    p_.ahead->Submit([this, ino, sv, key, promise] {
      p_.stripes->Complete(key, promise, LoadStripe(ino, sv));
    });
  }
}

Result<std::vector<StripeVersion>> StripeReader::StripeMap(uint64_t ino,
                                                           uint64_t first,
                                                           uint64_t last,
                                                           uint64_t file_size) {
  const uint64_t file_last = (file_size - 1) / geo_.stripe_size();
  const uint64_t window = std::min(
      kStripeMapWindow, file_last >= first ? file_last - first + 1 : 0);
  return p_.maps->ReadThrough(ino, first, last - first + 1, window,
                              StripeMapCache::Use::kRead,
                              [&](uint64_t from, uint64_t n) {
                                return p_.meta->GetStripes(ino, from, n);
                              });
}

Status StripeReader::ReadStripe(uint64_t ino, StripeVersion sv, uint64_t a,
                                uint64_t b, uint8_t* dst) {
  Status st;
  for (int attempt = 0; attempt < 3; ++attempt) {
    // Cells touched and the column range they share within the chunks.
    std::vector<int> want;
    uint32_t lo = UINT32_MAX, hi = 0;
    geo_.ForEachCell(a, b, sv.chunk_len, [&](const CellSpan& span) {
      want.push_back(static_cast<int>(span.cell));
      lo = std::min(lo, span.lo);
      hi = std::max(hi, span.hi);
    });
    if (want.empty()) return Status::Ok();  // past the stored bytes: zeros
    const auto shared_layout = p_.view->SharedLayoutFor(ino, sv.stripe);
    const ChunkLayout& layout = *shared_layout;
    std::array<CellRead, kMaxCells> cells;
    size_t ncells = 0;
    geo_.ForEachCell(a, b, sv.chunk_len, [&](const CellSpan& span) {
      if (ncells < kMaxCells)
        cells[ncells] = {span,
                         dst + (geo_.StripeOffset(span.cell, span.lo) - a)};
      ++ncells;
    });
    std::vector<Status> known;
    if (ncells <= kMaxCells &&
        ReadCellsInto(ino, sv, layout,
                      std::span<const CellRead>(cells.data(), ncells),
                      &known) == CellsOutcome::kRead)
      return Status::Ok();
    std::vector<std::vector<uint8_t>> cols;
    st = ReadColumnsAround(ino, sv, layout, want, lo, hi, &cols, known);
    if (st.ok()) {
      size_t w = 0;
      geo_.ForEachCell(a, b, sv.chunk_len, [&](const CellSpan& span) {
        std::memcpy(dst + (geo_.StripeOffset(span.cell, span.lo) - a),
                    cols[w++].data() + (span.lo - lo), span.hi - span.lo);
      });
      return Status::Ok();
    }
    // Servers may have come back (or gone) since our map was read.
    auto map_changed = p_.view->RefreshIfChanged();
    // A writer may have replaced (and collected) this version meanwhile.
    const uint64_t token = p_.maps->BeginFill();
    auto now = p_.meta->GetStripes(ino, sv.stripe, 1);
    if (now.ok() && !now->empty() && now->front().version != sv.version) {
      sv = now->front();
      p_.maps->Put(token, ino, sv);
      continue;
    }
    if (!map_changed.ok() || !*map_changed) break;
  }
  return st;
}

}  // namespace stripefs

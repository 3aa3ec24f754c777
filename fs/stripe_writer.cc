#include "fs/stripe_writer.h"

#include <algorithm>
#include <cstring>

namespace stripefs::fs {

namespace {
using Clock = std::chrono::steady_clock;
void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.fetch_add(n, std::memory_order_relaxed);
}
}  // namespace

const char* FlushReasonName(FlushReason r) {
  switch (r) {
    case FlushReason::kFull:
      return "full";
    case FlushReason::kFsync:
      return "fsync";
    case FlushReason::kFlush:
      return "flush";
    case FlushReason::kRelease:
      return "release";
    case FlushReason::kIdle:
      return "idle";
    case FlushReason::kMemoryCap:
      return "memory_cap";
    case FlushReason::kTruncate:
      return "truncate";
    case FlushReason::kDestroy:
      return "destroy";
    case FlushReason::kOther:
      return "other";
    case FlushReason::kCount:
      break;
  }
  return "?";
}

bool StripeWriter::Buffer::Complete(uint64_t stripe_size) const {
  return valid.size() == 1 && valid.begin()->first == 0 &&
         valid.begin()->second == stripe_size;
}

void StripeWriter::Buffer::AddRange(uint32_t start, uint32_t end) {
  // Merge [start, end) with every overlapping or touching range.
  auto it = valid.upper_bound(start);
  if (it != valid.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= start) {
      start = prev->first;
      end = std::max(end, prev->second);
      it = valid.erase(prev);
    }
  }
  while (it != valid.end() && it->first <= end) {
    end = std::max(end, it->second);
    it = valid.erase(it);
  }
  valid.emplace(start, end);
}

StripeWriter::StripeWriter(uint64_t ino, StripeClient* client,
                           MetaService* meta, CoalesceBudget* budget,
                           CoalesceCounters* counters,
                           StripeWriterOptions options)
    : ino_(ino),
      client_(client),
      meta_(meta),
      budget_(budget),
      counters_(counters),
      options_(options),
      stripe_size_(client->stripe_size()),
      own_pool_(options.pool != nullptr &&
                        options.pool->buffer_size() == stripe_size_
                    ? nullptr
                    : std::make_unique<BufferPool>(stripe_size_, 2)),
      pool_(own_pool_ ? own_pool_.get() : options.pool) {}

StripeWriter::~StripeWriter() {
  UniqueMutexLock lock(&mu_);
  cv_.wait(lock.native(), [&] {
    mu_.AssertHeld();
    return inflight_.empty();
  });  // sends borrow `this`
  for (auto& [s, b] : buffers_)
    budget_->Add(-static_cast<int64_t>(b->owned.size()));
  buffers_.clear();
}

void StripeWriter::RecomputeEnd() {
  uint64_t end = 0;
  auto scan = [&](const std::map<uint64_t, BufferPtr>& m) {
    for (const auto& [s, b] : m) {
      if (!b->valid.empty()) {
        end = std::max(end, s * stripe_size_ + b->valid.rbegin()->second);
      }
    }
  };
  scan(buffers_);
  scan(inflight_);
  buffered_end_ = end;
}

void StripeWriter::WaitNotInFlight(UniqueMutexLock& lock, uint64_t stripe) {
  cv_.wait(lock.native(), [&] {
    mu_.AssertHeld();
    return inflight_.count(stripe) == 0;
  });
}

StripeWriter::BufferPtr StripeWriter::TakeForSend(UniqueMutexLock& lock,
                                                  uint64_t stripe) {
  WaitNotInFlight(lock, stripe);
  auto it = buffers_.find(stripe);
  if (it == buffers_.end()) return nullptr;
  BufferPtr buf = it->second;
  buffers_.erase(it);
  inflight_[stripe] = buf;
  return buf;
}

Clock::time_point StripeWriter::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

uint64_t StripeWriter::SizeCap(uint64_t stripe) const {
  uint64_t low = UINT64_MAX;
  if (!buffers_.empty()) low = buffers_.begin()->first;
  if (!inflight_.empty()) low = std::min(low, inflight_.begin()->first);
  return low < stripe ? low * stripe_size_ : UINT64_MAX;
}

uint64_t StripeWriter::RaiseTarget() const {
  if (unsized_end_ == 0) return 0;
  const uint64_t target = std::min(unsized_end_, SizeCap(UINT64_MAX));
  return target > raised_to_ ? target : 0;
}

void StripeWriter::NoteCommitted(uint64_t start, uint64_t end) {
  if (start <= contig_end_) {
    contig_end_ = std::max(contig_end_, end);
  } else {
    uint64_t& e = committed_above_[start];
    e = std::max(e, end);
  }
  while (!committed_above_.empty() &&
         committed_above_.begin()->first <= contig_end_) {
    contig_end_ = std::max(contig_end_, committed_above_.begin()->second);
    committed_above_.erase(committed_above_.begin());
  }
}

void StripeWriter::Retire(const BufferPtr& buf, const Status& deferred,
                          bool committed, uint64_t unsized_end) {
  MutexLock lock(&mu_);
  if (!deferred.ok()) {
    Bump(counters_->deferred_errors);
    if (deferred_.ok()) deferred_ = deferred;
  }
  if (committed && !buf->valid.empty()) {
    // Stripe-granular: a hole inside a committed stripe is a real hole.
    const uint64_t base = buf->stripe * stripe_size_;
    NoteCommitted(base, base + buf->valid.rbegin()->second);
  }
  if (unsized_end > raised_to_)
    unsized_end_ = std::max(unsized_end_, unsized_end);
  ++size_epoch_;  // a commit (or a failed one) may have moved the size
  auto it = inflight_.find(buf->stripe);
  if (it != inflight_.end() && it->second == buf) inflight_.erase(it);
  if (buf->async) --sending_;
  budget_->Add(-static_cast<int64_t>(buf->owned.size()));
  // Back to the pool now (nothing reads a retired buffer's bytes), not when
  // the last BufferPtr copy (a sender task's) goes: budget and pool agree.
  buf->owned.reset();
  buf->kept.reset();
  buf->bytes = {};
  RecomputeEnd();
  cv_.notify_all();
}

Status StripeWriter::RaiseSize(uint64_t target, const Times* times) {
  SetAttrRequest req;
  if (target > 0) {
    req.mask = kSetSize | kSetSizeAtLeast |
               (client_->keep_file_times() ? kKeepTimes : 0u);
    req.size = target;
  }
  if (times) {
    req.mask |= kKeepTimes;  // a time not held is not stamped either
    if (times->mtime) req.mask |= kSetMtime, req.mtime = *times->mtime;
    if (times->ctime) req.mask |= kSetCtime, req.ctime = *times->ctime;
  }
  if (req.mask == 0) return Status::Ok();
  std::vector<ObsoleteStripe> none;  // a raise never drops stripes
  auto attr = meta_->SetAttr(ino_, req, &none);
  if (!attr.ok()) {
    return attr.status().Annotate(target > 0 ? "raising the file size"
                                             : "storing the file's times");
  }
  if (target == 0) return Status::Ok();
  Bump(counters_->size_raises);
  MutexLock lock(&mu_);
  raised_to_ = std::max(raised_to_, target);
  if (unsized_end_ <= target) unsized_end_ = 0;
  ++size_epoch_;
  NoteCommitted(0, target);
  return Status::Ok();
}

StripeWriter::TimesHold StripeWriter::Held() const {
  if (hold_gen_ <= stored_gen_) return {};
  return {held_, hold_gen_};
}

bool StripeWriter::Idle() const {
  return buffers_.empty() && inflight_.empty() && unsized_end_ == 0;
}

bool StripeWriter::HoldTimes(const Times& t) {
  MutexLock lock(&mu_);
  if (Idle() && !storing_times_ && hold_gen_ <= stored_gen_) return false;
  if (hold_gen_ <= stored_gen_) held_ = {};
  if (t.mtime) held_.mtime = t.mtime;
  if (t.ctime) held_.ctime = t.ctime;
  ++hold_gen_;
  return true;
}

StripeWriter::Times StripeWriter::HeldTimes() const {
  MutexLock lock(&mu_);
  return Held().times;
}

bool StripeWriter::HoldsTimes() const {
  MutexLock lock(&mu_);
  return hold_gen_ > stored_gen_;
}

Status StripeWriter::StoreTimes(const TimesHold& first_hold, uint64_t raise) {
  MutexLock serial(&store_mu_);
  TimesHold hold = first_hold;
  Status first;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (hold.gen <= stored_gen_) hold = {};  // a later one is stored
      if (hold.gen == 0 && raise == 0) break;
      storing_times_ = true;
    }
    Status st = RaiseSize(raise, hold.gen != 0 ? &hold.times : nullptr);
    if (first.ok()) first = st;
    raise = 0;
    MutexLock lock(&mu_);
    storing_times_ = false;
    // Stored, or dropped on failure (reported by the caller).
    stored_gen_ = std::max(stored_gen_, hold.gen);
    // Held while this store ran, with nothing pending: theirs now.
    hold = Idle() ? Held() : TimesHold{};
    if (hold.gen == 0) break;
  }
  return first;
}

void StripeWriter::SeedContig() {
  if (contig_known_) return;
  mu_.unlock();                      // not held across the metadata round trip
  auto attr = meta_->GetAttr(ino_);  // once: where the file ended
  mu_.lock();
  if (attr.ok() && !contig_known_) {
    contig_known_ = true;
    NoteCommitted(0, attr->size);
  }
}

uint64_t StripeWriter::DataEnd(const Buffer& buf) const {
  const uint64_t base = buf.stripe * stripe_size_;
  return buf.valid.empty() ? base : base + buf.valid.rbegin()->second;
}

Status StripeWriter::SendBuffer(const BufferPtr& buf, FlushReason why,
                                bool defer) {
  Status st;
  const uint64_t base = buf->stripe * stripe_size_;
  const uint64_t data_end = DataEnd(*buf);
  UniqueMutexLock lock(&mu_);
  SeedContig();
  // Below a pending stripe, or past a gap a later WRITE may still fill
  // (WRITEs of one stream arrive out of order on several FUSE threads).
  uint64_t cap = SizeCap(buf->stripe);
  if (base > contig_end_) cap = std::min(cap, contig_end_);
  lock.Unlock();
  if (cap < data_end) Bump(counters_->capped_commits);
  if (buf->Complete(stripe_size_)) {
    st = client_->Write(ino_, base, buf->bytes.first(stripe_size_), cap);
    Bump(buf->owned.empty() ? counters_->full_direct
                            : counters_->full_from_buffer);
  } else {
    // One version and one commit for all the valid ranges.
    uint64_t bytes = 0;
    std::vector<StripeRange> ranges;
    for (const auto& [a, b] : buf->valid) {
      ranges.push_back({a, b});
      bytes += b - a;
    }
    if (!ranges.empty()) {
      st = client_->WriteStripe(ino_, buf->stripe, buf->bytes, ranges,
                                std::min(base + ranges.back().end, cap));
    }
    Bump(counters_->partial_flushes[static_cast<int>(why)]);
    Bump(counters_->partial_bytes, bytes);
  }
  // A failed stripe's data is dropped: nothing of it needs a size. EOF over
  // a capped stripe moves with the next commit that has nothing pending
  // below it, or by RaiseSize() (Flush, FlushIdle).
  if (st.ok() && cap >= data_end) {
    // The last pending stripe is in: the held times follow it now (before
    // it retires, while `this` is still ours).
    TimesHold times;
    {
      MutexLock lock(&mu_);
      if (buffers_.empty() && inflight_.size() == 1 &&
          inflight_.begin()->second == buf && unsized_end_ == 0)
        times = Held();
    }
    if (times.gen != 0) {
      Status ts = StoreTimes(times, 0);
      if (!ts.ok()) {
        MutexLock lock(&mu_);
        Bump(counters_->deferred_errors);
        if (deferred_.ok()) deferred_ = ts;
      }
    }
  }
  Retire(buf, defer ? st : Status::Ok(), st.ok(),
         st.ok() && cap < data_end ? data_end : 0);
  return st;  // `buf` retired: a pipelined send must not touch `this` now
}

std::vector<uint64_t> StripeWriter::BatchCaps(
    const std::vector<BufferPtr>& bufs) const {
  // The batch commits atomically, so only pending stripes outside it cap
  // its size, and a member past a gap is capped where the data below it
  // (the batch's lower members included) ends.
  auto outside = [&](const std::map<uint64_t, BufferPtr>& m) {
    for (const auto& entry : m) {
      if (std::find(bufs.begin(), bufs.end(), entry.second) == bufs.end())
        return entry.first;
    }
    return UINT64_MAX;
  };
  const uint64_t low = std::min(outside(buffers_), outside(inflight_));
  std::vector<uint64_t> caps;
  uint64_t contig = contig_end_;
  for (const BufferPtr& b : bufs) {
    const uint64_t base = b->stripe * stripe_size_;
    uint64_t cap = low < b->stripe ? low * stripe_size_ : UINT64_MAX;
    if (base > contig) {
      cap = std::min(cap, contig);
    } else {
      contig = std::max(contig, DataEnd(*b));
    }
    caps.push_back(cap);
  }
  return caps;
}

Status StripeWriter::SendBatch(const std::vector<BufferPtr>& bufs,
                               FlushReason why) {
  std::vector<uint64_t> caps;
  {
    UniqueMutexLock lock(&mu_);
    SeedContig();
    caps = BatchCaps(bufs);
  }
  std::vector<StripeWriteRequest> reqs;
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Buffer& b = *bufs[i];
    if (b.valid.empty()) continue;
    StripeWriteRequest req;
    req.ino = ino_;
    req.stripe = b.stripe;
    req.bytes = b.bytes;
    for (const auto& [lo, hi] : b.valid) req.ranges.push_back({lo, hi});
    req.min_file_size = std::min(DataEnd(b), caps[i]);
    if (caps[i] < DataEnd(b)) Bump(counters_->capped_commits);
    if (b.Complete(stripe_size_)) {
      Bump(counters_->full_from_buffer);
    } else {
      Bump(counters_->partial_flushes[static_cast<int>(why)]);
      for (const auto& r : req.ranges)
        Bump(counters_->partial_bytes, r.end - r.begin);
    }
    reqs.push_back(std::move(req));
  }
  // One version per stripe, all committed by one metadata call.
  const Status st = reqs.empty() ? Status::Ok() : client_->WriteStripes(reqs);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const uint64_t end = DataEnd(*bufs[i]);
    Retire(bufs[i], Status::Ok(), st.ok(), st.ok() && caps[i] < end ? end : 0);
  }
  return st;
}

Status StripeWriter::Dispatch(const BufferPtr& buf, FlushReason why,
                              bool defer) {
  StripeSender* sender = options_.sender;
  if (!sender) return SendBuffer(buf, why, defer);
  {
    UniqueMutexLock lock(&mu_);
    const size_t window = std::max<size_t>(options_.file_window, 1);
    if (sending_ >= window) {
      Bump(counters_->file_window_waits);
      cv_.wait(lock.native(), [&] {
        mu_.AssertHeld();
        return sending_ < window;
      });
    }
    ++sending_;
    buf->async = true;
  }
  sender->Submit([this, buf, why] { (void)SendBuffer(buf, why, true); });
  return Status::Ok();
}

void StripeWriter::WaitRetired(UniqueMutexLock& lock,
                               const std::vector<BufferPtr>& bufs) {
  cv_.wait(lock.native(), [&] {
    mu_.AssertHeld();
    for (const auto& b : bufs) {
      auto it = inflight_.find(b->stripe);
      if (it != inflight_.end() && it->second == b) return false;
    }
    return true;
  });
}

Status StripeWriter::Write(uint64_t offset, std::span<const uint8_t> data,
                           const KeepFn& keep) {
  if (!options_.coalesce) {
    Bump(counters_->write_through);
    Status st = client_->Write(ino_, offset, data);
    ForgetCommittedSize();  // whatever the outcome
    return st;
  }
  const uint64_t S = stripe_size_;
  // The caller's buffer, once kept (shared by this WRITE's whole stripes).
  std::shared_ptr<BufferPool::Lease> kept;
  bool keep_tried = false;
  uint64_t pos = 0;
  while (pos < data.size()) {
    const uint64_t abs = offset + pos;
    const uint64_t s = abs / S;
    const uint32_t off = static_cast<uint32_t>(abs % S);
    const uint64_t n = std::min<uint64_t>(S - off, data.size() - pos);
    auto piece = data.subspan(pos, n);
    pos += n;

    const bool whole = off == 0 && n == S;
    if (whole && options_.sender && keep && !keep_tried) {
      // A pipelined send outlives the request: it may use the request's
      // bytes only if the caller hands their memory over.
      keep_tried = true;
      BufferPool::Lease l = keep();
      if (l.empty()) {
        Bump(counters_->keep_refused);
      } else {
        kept = std::make_shared<BufferPool::Lease>(std::move(l));
      }
    }
    UniqueMutexLock lock(&mu_);
    BufferPtr send;
    if (whole && (!options_.sender || kept) && buffers_.count(s) == 0) {
      // A whole stripe with nothing buffered: send it from the request
      // (synchronously, or pipelined from the kept request buffer).
      WaitNotInFlight(lock, s);
      if (buffers_.count(s) == 0) {
        send = std::make_shared<Buffer>();
        send->stripe = s;
        send->kept = kept;
        send->bytes = piece;
        send->valid.emplace(0, static_cast<uint32_t>(S));
        send->last_write = Now();
        inflight_[s] = send;
        RecomputeEnd();
      }
    }
    if (!send) {
      BufferPtr& b = buffers_[s];
      if (!b) {
        b = std::make_shared<Buffer>();
        b->stripe = s;
        b->owned = pool_->Get();  // stale bytes: only valid ranges are read
        b->bytes = b->owned.span();
        budget_->Add(static_cast<int64_t>(S));
      }
      std::memcpy(b->owned.data() + off, piece.data(), n);
      b->AddRange(off, static_cast<uint32_t>(off + n));
      b->last_write = Now();
      buffered_end_ = std::max(buffered_end_, abs + n);
      if (b->Complete(S)) send = TakeForSend(lock, s);
    }
    lock.Unlock();
    // A failed copied buffer may hold bytes of earlier WRITEs that were
    // acknowledged already: the next Flush() must report it too.
    if (send) {
      STRIPEFS_RETURN_IF_ERROR(
          Dispatch(send, FlushReason::kFull, !send->owned.empty()));
    }
  }
  // Over the memory cap: this writer pays by sending its oldest stripes.
  while (budget_->over() && FlushOldest(FlushReason::kMemoryCap)) {
  }
  return Status::Ok();
}

Result<size_t> StripeWriter::Read(uint64_t offset, std::span<uint8_t> out) {
  struct Piece {
    uint64_t off;
    std::vector<uint8_t> bytes;
  };
  std::vector<Piece> pieces;
  uint64_t buffered_end = 0, unsized_end = 0;
  uint64_t epoch = 0, size = 0;
  bool have_size = false;
  const uint64_t S = stripe_size_;
  const uint64_t want_end = offset + out.size();
  {
    MutexLock lock(&mu_);
    buffered_end = buffered_end_;
    unsized_end = unsized_end_;
    epoch = size_epoch_;
    have_size = cached_size_epoch_ == epoch;
    size = cached_size_;
    // In-flight data is older than buffered data of the same stripe: overlay
    // it first.
    for (const auto* m : {&inflight_, &buffers_}) {
      for (auto it = m->lower_bound(offset / S);
           it != m->end() && it->first * S < want_end; ++it) {
        const uint64_t base = it->first * S;
        for (const auto& [a, b] : it->second->valid) {
          const uint64_t lo = std::max(base + a, offset);
          const uint64_t hi = std::min(base + b, want_end);
          if (lo >= hi) continue;
          const uint8_t* src = it->second->bytes.data() + (lo - base);
          pieces.push_back({lo, std::vector<uint8_t>(src, src + (hi - lo))});
        }
      }
    }
  }
  // Anything that left the buffers before the snapshot is committed now, so
  // the size read after the snapshot, or unsized_end_, covers it. A cached
  // size is as good: it was read after the last retire before the snapshot
  // (every retire moves size_epoch_).
  if (!have_size) {
    Bump(counters_->read_size_fetches);
    auto attr = meta_->GetAttr(ino_);
    if (!attr.ok()) return attr.status();
    size = attr->size;
    MutexLock lock(&mu_);
    if (size_epoch_ == epoch) {
      cached_size_ = size;
      cached_size_epoch_ = epoch;
    }
  }
  const uint64_t committed = std::max(size, unsized_end);
  const uint64_t logical = std::max(committed, buffered_end);
  if (offset >= logical || out.empty()) return size_t{0};
  const size_t n =
      static_cast<size_t>(std::min<uint64_t>(out.size(), logical - offset));
  std::memset(out.data(), 0, n);
  if (offset < committed) {
    auto got = client_->Read(ino_, offset, out.first(n), committed);
    if (!got.ok()) return got.status();
  }
  for (const auto& p : pieces) {
    if (p.off >= offset + n) continue;
    const size_t len = static_cast<size_t>(
        std::min<uint64_t>(p.bytes.size(), offset + n - p.off));
    std::memcpy(out.data() + (p.off - offset), p.bytes.data(), len);
  }
  return n;
}

Status StripeWriter::Flush(FlushReason why) {
  Status first;
  UniqueMutexLock lock(&mu_);
  // Only what is buffered or in flight now: stripes buffered later are not
  // waited for (a continuous writer must not starve fsync).
  std::vector<uint64_t> stripes;
  stripes.reserve(buffers_.size());
  for (const auto& [s, b] : buffers_) stripes.push_back(s);
  std::vector<BufferPtr> pending;
  for (const auto& [s, b] : inflight_) pending.push_back(b);
  // Times held now describe data buffered or in flight now: stored once
  // this flush has committed it.
  const TimesHold times = Held();
  std::vector<BufferPtr> batch;
  for (uint64_t s : stripes) {
    // Waits for a send of `s` by someone else (its error, if deferred, is
    // recorded before it retires); null if that send took our data.
    BufferPtr buf = TakeForSend(lock, s);
    if (buf) batch.push_back(buf);
  }
  if (!batch.empty()) {
    // Every dirty stripe in one batch, sent from this thread (it waits
    // anyway): made in parallel, committed by one metadata call.
    lock.Unlock();
    first = SendBatch(batch, why);
    lock.Lock();
  }
  WaitRetired(lock, pending);
  if (first.ok() && !deferred_.ok()) {
    first = deferred_;
    deferred_ = Status::Ok();
    Bump(counters_->reported_errors);
  }
  const uint64_t raise = RaiseTarget();
  lock.Unlock();
  if (first.ok() && (raise > 0 || times.gen != 0))
    first = StoreTimes(times, raise);
  return first;
}

void StripeWriter::FlushIdle(Clock::time_point cutoff,
                             Clock::time_point frontier_cutoff) {
  UniqueMutexLock lock(&mu_);
  auto due = [&](uint64_t s, const Buffer& b) {
    mu_.AssertHeld();  // called with `lock` held
    const bool frontier =
        b.valid.size() == 1 && buffered_end_ > 0 &&
        s * stripe_size_ + b.valid.begin()->second == buffered_end_;
    return b.last_write <
           (frontier ? std::min(cutoff, frontier_cutoff) : cutoff);
  };
  std::vector<uint64_t> idle;
  for (const auto& [s, b] : buffers_) {
    if (due(s, *b)) idle.push_back(s);
  }
  for (uint64_t s : idle) {
    auto it = buffers_.find(s);
    if (it == buffers_.end() || !due(s, *it->second)) continue;
    BufferPtr buf = TakeForSend(lock, s);
    if (!buf) continue;
    lock.Unlock();
    (void)Dispatch(buf, FlushReason::kIdle, true);
    lock.Lock();
  }
  // A writer that stopped without fsync: EOF catches up with its data once
  // nothing is pending below it (a failure is retried by Flush()).
  uint64_t raise = inflight_.empty() ? RaiseTarget() : 0;
  if (raise > contig_end_) raise = contig_end_ > raised_to_ ? contig_end_ : 0;
  lock.Unlock();
  if (raise > 0) (void)RaiseSize(raise);
  // Times held with nothing pending (their data went in meanwhile).
  lock.Lock();
  const TimesHold times = Idle() ? Held() : TimesHold{};
  lock.Unlock();
  if (times.gen != 0) {
    Status ts = StoreTimes(times, 0);
    if (!ts.ok()) {
      MutexLock relock(&mu_);
      Bump(counters_->deferred_errors);
      if (deferred_.ok()) deferred_ = ts;
    }
  }
}

bool StripeWriter::FlushOldest(FlushReason why) {
  UniqueMutexLock lock(&mu_);
  if (buffers_.empty()) return false;
  auto oldest = buffers_.begin();
  for (auto it = buffers_.begin(); it != buffers_.end(); ++it) {
    if (it->second->last_write < oldest->second->last_write) oldest = it;
  }
  BufferPtr buf = TakeForSend(lock, oldest->first);
  lock.Unlock();
  if (!buf) return true;
  (void)Dispatch(buf, why, true);
  lock.Lock();
  WaitRetired(lock, {buf});  // the memory is freed when this returns
  return true;
}

Result<InodeAttr> StripeWriter::Truncate(uint64_t new_size) {
  {
    MutexLock lock(&mu_);
    const uint64_t S = stripe_size_;
    for (auto it = buffers_.lower_bound(new_size / S); it != buffers_.end();) {
      Buffer& b = *it->second;
      const uint64_t base = it->first * S;
      const uint32_t cut =
          new_size > base ? static_cast<uint32_t>(new_size - base) : 0;
      // Drop the valid ranges at or past `cut`, shorten the one across it.
      for (auto r = b.valid.lower_bound(cut); r != b.valid.end();)
        r = b.valid.erase(r);
      if (!b.valid.empty() && b.valid.rbegin()->second > cut)
        b.valid.rbegin()->second = cut;
      if (b.valid.empty()) {
        budget_->Add(-static_cast<int64_t>(b.owned.size()));
        it = buffers_.erase(it);
      } else {
        ++it;
      }
    }
    RecomputeEnd();
  }
  STRIPEFS_RETURN_IF_ERROR(Flush(FlushReason::kTruncate));
  {
    MutexLock lock(&mu_);
    unsized_end_ = std::min(unsized_end_, new_size);
    raised_to_ = std::min(raised_to_, new_size);
    ++size_epoch_;
  }
  auto attr = meta_->GetAttr(ino_);
  if (!attr.ok()) return attr.status();
  auto resized = client_->Truncate(ino_, attr->size, new_size);
  {
    MutexLock lock(&mu_);
    ++size_epoch_;  // whatever the outcome
  }
  if (resized.ok()) {
    MutexLock lock(&mu_);
    committed_above_.clear();
    contig_end_ = resized->size;
    contig_known_ = true;
  }
  return resized;
}

Clock::time_point StripeWriter::OldestWrite() const {
  MutexLock lock(&mu_);
  auto t = Clock::time_point::max();
  for (const auto& [s, b] : buffers_) t = std::min(t, b->last_write);
  return t;
}

uint64_t StripeWriter::BufferedEnd() const {
  MutexLock lock(&mu_);
  return std::max(buffered_end_, unsized_end_);
}

bool StripeWriter::HasBuffered() const {
  MutexLock lock(&mu_);
  return !buffers_.empty() || !inflight_.empty();
}

std::vector<uint64_t> StripeWriter::BufferedStripes() const {
  MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  for (const auto& [s, b] : buffers_) out.push_back(s);
  for (const auto& [s, b] : inflight_) out.push_back(s);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void StripeWriter::ForgetCommittedSize() {
  MutexLock lock(&mu_);
  ++size_epoch_;
}

void StripeWriter::Discard() {
  UniqueMutexLock lock(&mu_);
  for (auto& [s, b] : buffers_)
    budget_->Add(-static_cast<int64_t>(b->owned.size()));
  buffers_.clear();
  cv_.wait(lock.native(), [&] {
    mu_.AssertHeld();
    return inflight_.empty();
  });
  unsized_end_ = 0;
  committed_above_.clear();
  RecomputeEnd();
}

}  // namespace stripefs::fs

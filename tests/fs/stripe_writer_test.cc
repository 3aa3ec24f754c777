// Unit tests of StripeWriter alone (no FUSE, no kernel): a writer over a
// real StripeClient on an in-process volume (MetaStore + 6 ChunkStores in a
// temporary directory, each behind a fault-injecting wrapper), 4+2 with
// 4 KiB cells (S = 16 KiB). Time is a fake clock handed to the writer; no
// test looks at wall-clock time. Backend behaviour is checked with the
// StripeClient's counters and the committed stripes in the metadata.
#include "fs/stripe_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "backend/chunk/chunk_store.h"
#include "backend/client/volume.h"
#include "tests/client/counting_meta_service.h"
#include "tests/support/fault_injecting_chunk_service.h"
#include "tests/support/in_process_volume.h"
#include "tests/support/random_bytes.h"

namespace stripefs::fs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Deterministic test payload (tests/support/random_bytes.h).
std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  return testing::RandomBytes(n, seed);
}

void Put(std::vector<uint8_t>* model, uint64_t off,
         const std::vector<uint8_t>& d) {
  if (model->size() < off + d.size()) model->resize(off + d.size());
  std::copy(d.begin(), d.end(), model->begin() + static_cast<long>(off));
}

// Backend writes can be made to block (gate) or to run a hook first.
class HookedChunkService : public testing::FaultInjectingChunkService {
 public:
  using FaultInjectingChunkService::FaultInjectingChunkService;
  Status WriteChunk(const ChunkId& id, uint64_t version,
                    std::span<const uint8_t> data) override {
    std::function<void()> hook;
    std::function<void(const ChunkId&)> id_hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = hook_;
      id_hook = id_hook_;
    }
    if (hook) hook();
    if (id_hook) id_hook(id);
    return FaultInjectingChunkService::WriteChunk(id, version, data);
  }
  void SetHook(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }
  void SetIdHook(std::function<void(const ChunkId&)> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    id_hook_ = std::move(hook);
  }

 private:
  std::mutex mu_;
  std::function<void()> hook_;
  std::function<void(const ChunkId&)> id_hook_;
};

// Holds backend chunk writes until opened (bounded: opens itself after
// 30 s so a broken test cannot hang forever).
class Gate {
 public:
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> l(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait_for(l, std::chrono::seconds(30), [&] { return open_; });
  }
  // Waits (bounded) until `n` writes reached the gate.
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30),
                        [&] { return entered_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int entered_ = 0;
};

class FakeClock {
 public:
  Clock::time_point Now() const { return Clock::time_point(milliseconds(t_)); }
  void Advance(milliseconds d) { t_ += d.count(); }
  std::function<Clock::time_point()> Fn() {
    return [this] { return Now(); };
  }

 private:
  std::atomic<int64_t> t_{1000000};
};

class StripeWriterTest : public ::testing::Test {
 protected:
  static constexpr int kServers = 6;

  void SetUp() override {
    testing::InProcessVolumeOptions o;
    o.servers = kServers;
    o.geometry = Geometry{4, 2, 4096};
    o.wrap_chunks = [](ChunkService* store) {
      return std::make_unique<HookedChunkService>(store);
    };
    o.wrap_meta = [this](std::unique_ptr<MetaService> inner) {
      auto c = std::make_unique<testing::CountingMetaService>(std::move(inner));
      counting_ = c.get();
      return c;
    };
    auto v = testing::InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vol_ = std::move(v).value();
    for (size_t i = 0; i < vol_->servers(); ++i)
      services_.push_back(vol_->service<HookedChunkService>(i));
    S = client().stripe_size();
    ASSERT_EQ(S, 16384u);
    auto a = meta().MkNode(kRootInode, "f", 0100644, 0, 0, 0);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ino_ = a->ino;
    budget_ = std::make_unique<CoalesceBudget>(uint64_t{1} << 30);
  }
  void TearDown() override {
    for (auto* s : services_) s->SetHook(nullptr);
    for (auto* s : services_) s->SetIdHook(nullptr);
    writer_.reset();
    sender_.reset();
    vol_.reset();
  }

  StripeWriter& NewWriter(bool coalesce = true, uint64_t cap = 1ull << 30,
                          BufferPool* pool = nullptr) {
    writer_.reset();  // it borrows the budget
    budget_ = std::make_unique<CoalesceBudget>(cap);
    StripeWriterOptions o;
    o.coalesce = coalesce;
    o.clock = clock_.Fn();
    o.pool = pool;
    writer_ = std::make_unique<StripeWriter>(ino_, &client(), &meta(),
                                             budget_.get(), &counters_, o);
    return *writer_;
  }
  // Pipelined: sends run on a StripeSender with these windows.
  StripeWriter& NewPipelinedWriter(size_t file_window, size_t mount_window,
                                   uint64_t cap = 1ull << 30,
                                   BufferPool* pool = nullptr) {
    writer_.reset();
    sender_ = std::make_unique<StripeSender>(mount_window);
    budget_ = std::make_unique<CoalesceBudget>(cap);
    StripeWriterOptions o;
    o.clock = clock_.Fn();
    o.pool = pool;
    o.sender = sender_.get();
    o.file_window = file_window;
    writer_ = std::make_unique<StripeWriter>(ino_, &client(), &meta(),
                                             budget_.get(), &counters_, o);
    return *writer_;
  }
  // Writes go to a new empty file `name` from now on.
  void UseNewFile(const std::string& name) {
    writer_.reset();
    auto a = meta().MkNode(kRootInode, name, 0100644, 0, 0, 0);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ino_ = a->ino;
  }
  void HookIds(std::function<void(const ChunkId&)> h) {
    for (auto* s : services_) s->SetIdHook(h);
  }
  MetaService& meta() { return vol_->volume().meta(); }
  StripeClient& client() { return vol_->volume().client(); }
  ClientCountersSnapshot backend() { return client().counters(); }
  uint64_t Partial(FlushReason r) {
    return counters_.partial_flushes[static_cast<int>(r)].load();
  }
  uint64_t CommittedSize() { return meta().GetAttr(ino_)->size; }
  std::vector<uint64_t> CommittedStripes() {
    auto sv = meta().GetStripes(ino_, 0, 1000);
    EXPECT_TRUE(sv.ok());
    std::vector<uint64_t> out;
    if (sv.ok())
      for (const auto& v : *sv) out.push_back(v.stripe);
    return out;
  }
  // What the backend holds (committed size and data), bypassing the writer.
  std::vector<uint8_t> Backend() {
    const uint64_t size = CommittedSize();
    std::vector<uint8_t> out(size);
    auto n = client().Read(ino_, 0, out, size);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return out;
  }
  // What the writer shows (buffered data on top of the backend).
  std::vector<uint8_t> Through(StripeWriter& w, uint64_t off, size_t len) {
    std::vector<uint8_t> out(len);
    auto n = w.Read(off, out);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }
  int ChunkWrites() {
    int n = 0;
    for (auto* s : services_) n += s->writes.load();
    return n;
  }
  // More than m servers fail their writes ("disk full"): stripe writes fail
  // with ENOSPC and keep the previous version.
  void FailWrites(bool fail) {
    for (int i = 0; i < 3; ++i) services_[i]->fail_writes = fail;
  }
  void HookAll(std::function<void()> h) {
    for (auto* s : services_) s->SetHook(h);
  }

  std::unique_ptr<testing::InProcessVolume> vol_;
  testing::CountingMetaService* counting_ = nullptr;  // owned by vol_
  std::vector<HookedChunkService*> services_;         // owned by vol_
  uint64_t S = 0;
  uint64_t ino_ = 0;
  FakeClock clock_;
  CoalesceCounters counters_;
  std::unique_ptr<CoalesceBudget> budget_;
  std::unique_ptr<StripeSender> sender_;  // outlives the writer
  std::unique_ptr<StripeWriter> writer_;
};

TEST_F(StripeWriterTest, UnalignedWritesBecomeOneFullStripeEncodeEach) {
  StripeWriter& w = NewWriter();
  auto d = Pattern(4 * S, 1);
  const size_t sizes[] = {3000, 7, 10000, 4096, 333, 12345};
  size_t off = 0;
  uint64_t completed = 0;
  for (int i = 0; off < d.size(); ++i) {
    const size_t n = std::min(sizes[i % 6], d.size() - off);
    ASSERT_TRUE(w.Write(off, {d.data() + off, n}).ok());
    off += n;
    // A stripe goes to the backend exactly when its last byte arrives.
    completed = off / S;
    EXPECT_EQ(backend().full_stripe_writes, completed) << "after " << off;
    EXPECT_EQ(CommittedSize(), completed * S);
  }
  const auto b = backend();
  EXPECT_EQ(b.full_stripe_writes, 4u);
  EXPECT_EQ(b.new_partial_stripes, 0u);
  EXPECT_EQ(b.rmw_stripes, 0u);
  EXPECT_EQ(b.parity_delta_updates, 0u);
  EXPECT_EQ(b.rmw_bytes_read, 0u);
  EXPECT_EQ(ChunkWrites(), 4 * kServers);  // k+m chunks per stripe, once
  EXPECT_EQ(counters_.full_from_buffer.load(), 4u);
  EXPECT_EQ(counters_.full_direct.load(), 0u);
  EXPECT_FALSE(w.HasBuffered());
  EXPECT_EQ(budget_->used(), 0u);
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Partial(FlushReason::kFsync), 0u);  // nothing was left
  EXPECT_EQ(Backend(), d);
}

TEST_F(StripeWriterTest, WritesInAnyOrderCoalesce) {
  StripeWriter& w = NewWriter();
  auto d = Pattern(3 * S, 2);
  std::vector<size_t> starts;
  for (size_t o = 0; o < d.size(); o += 1000) starts.push_back(o);
  std::shuffle(starts.begin(), starts.end(), std::mt19937(3));
  for (size_t o : starts) {
    const size_t n = std::min<size_t>(1000, d.size() - o);
    ASSERT_TRUE(w.Write(o, {d.data() + o, n}).ok());
  }
  EXPECT_EQ(backend().full_stripe_writes, 3u);
  EXPECT_EQ(backend().new_partial_stripes + backend().rmw_stripes, 0u);
  EXPECT_FALSE(w.HasBuffered());
  EXPECT_EQ(Backend(), d);
}

TEST_F(StripeWriterTest, WholeStripeWritesGoOutUncopied) {
  StripeWriter& w = NewWriter();
  // 2.5 stripes at a stripe boundary: two whole stripes straight from the
  // request, the half stripe buffered.
  auto d = Pattern(2 * S + S / 2, 4);
  ASSERT_TRUE(w.Write(S, d).ok());
  EXPECT_EQ(counters_.full_direct.load(), 2u);
  EXPECT_EQ(counters_.full_from_buffer.load(), 0u);
  EXPECT_EQ(backend().full_stripe_writes, 2u);
  EXPECT_EQ(budget_->used(), S);  // only the half stripe is copied
  EXPECT_EQ(w.BufferedStripes(), std::vector<uint64_t>{3});
  EXPECT_EQ(w.BufferedEnd(), 3 * S + S / 2);
  // Stripe 0 was never written: a later WRITE may still be on its way
  // there, so EOF waits for the flush (size follows data).
  EXPECT_EQ(CommittedSize(), 0u);
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(CommittedSize(), 3 * S + S / 2);
  std::vector<uint8_t> model;
  Put(&model, S, d);
  EXPECT_EQ(Backend(), model);
}

// Stripe buffers are pooled and never zero-filled: a partial stripe that
// reuses the buffer of a full one holds that stripe's bytes outside its
// valid ranges. None of them may reach the backend or a read: the gaps of a
// new stripe read as zeros, an existing stripe keeps its old bytes there.
TEST_F(StripeWriterTest, ReusedStripeBufferLeaksNoStaleBytes) {
  for (const bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "synchronous");
    UseNewFile(pipelined ? "reuse-pipelined" : "reuse-sync");
    BufferPool pool(S, 1);
    StripeWriter& w = pipelined ? NewPipelinedWriter(4, 4, 1ull << 30, &pool)
                                : NewWriter(true, 1ull << 30, &pool);
    // Stripe 0 arrives in two WRITEs, so it is copied into a pooled buffer
    // (also without a sender); a non-zero pattern fills that buffer.
    auto full = Pattern(S, 21);
    ASSERT_TRUE(w.Write(0, {full.data(), S / 2}).ok());
    ASSERT_TRUE(w.Write(S / 2, {full.data() + S / 2, S / 2}).ok());
    ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
    const uint64_t reuses = pool.reuses();
    // A new stripe (2), two small ranges: its buffer is the reused one.
    auto a = Pattern(700, 22), b = Pattern(300, 23);
    ASSERT_TRUE(w.Write(2 * S + 1000, a).ok());
    ASSERT_TRUE(w.Write(2 * S + 9000, b).ok());
    EXPECT_EQ(pool.reuses(), reuses + 1) << "the buffer was not reused";
    std::vector<uint8_t> model = full;
    Put(&model, 2 * S + 1000, a);
    Put(&model, 2 * S + 9000, b);
    EXPECT_EQ(Through(w, 0, 3 * S), model);  // buffered: overlay only ranges
    // Stripe 0 again, partially (delta or RMW over the committed bytes).
    auto c = Pattern(100, 24);
    ASSERT_TRUE(w.Write(5000, c).ok());
    Put(&model, 5000, c);
    ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
    EXPECT_EQ(Backend(), model);  // zeros in stripe 1 and stripe 2's gaps
    EXPECT_EQ(Through(w, 0, 3 * S), model);
    writer_.reset();  // before `pool` goes (it would be fine: leases share)
  }
}

TEST_F(StripeWriterTest, PartialStripeStaysBufferedUntilFlush) {
  StripeWriter& w = NewWriter();
  auto d = Pattern(5000, 5);
  ASSERT_TRUE(w.Write(S + 100, d).ok());
  EXPECT_EQ(CommittedSize(), 0u);  // nothing reached the backend
  EXPECT_EQ(ChunkWrites(), 0);
  EXPECT_TRUE(w.HasBuffered());
  EXPECT_EQ(w.BufferedEnd(), S + 100 + 5000);
  std::vector<uint8_t> model;
  Put(&model, S + 100, d);
  EXPECT_EQ(Through(w, 0, 10 * S), model);
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Partial(FlushReason::kFsync), 1u);
  EXPECT_EQ(counters_.partial_bytes.load(), 5000u);
  EXPECT_EQ(backend().new_partial_stripes, 1u);
  EXPECT_EQ(backend().full_stripe_writes, 0u);
  EXPECT_FALSE(w.HasBuffered());
  EXPECT_EQ(w.BufferedEnd(), 0u);
  EXPECT_EQ(budget_->used(), 0u);
  EXPECT_EQ(Backend(), model);
  // FLUSH (close) behaves the same and is counted under its own reason.
  ASSERT_TRUE(w.Write(7, d).ok());
  ASSERT_TRUE(w.Flush(FlushReason::kFlush).ok());
  EXPECT_EQ(Partial(FlushReason::kFlush), 1u);
  Put(&model, 7, d);
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, FrontierStripeOfASequentialWriterIsHeldLonger) {
  StripeWriter& w = NewWriter();
  const auto idle = milliseconds(2000), hold = milliseconds(30000);
  // A sequential writer: stripe 0 complete (sent), stripe 1 half written.
  auto first = Pattern(S + S / 2, 8);
  ASSERT_TRUE(w.Write(0, first).ok());
  EXPECT_EQ(w.BufferedStripes(), std::vector<uint64_t>{1});
  clock_.Advance(milliseconds(5000));  // writeback paused 5 s
  w.FlushIdle(clock_.Now() - idle, clock_.Now() - hold);
  EXPECT_EQ(Partial(FlushReason::kIdle), 0u);  // frontier: still held
  // The writer comes back and completes the stripe: one full-stripe encode,
  // no RMW.
  auto rest = Pattern(S / 2, 9);
  ASSERT_TRUE(w.Write(S + S / 2, rest).ok());
  EXPECT_FALSE(w.HasBuffered());
  EXPECT_EQ(backend().full_stripe_writes, 2u);
  EXPECT_EQ(backend().rmw_stripes + backend().parity_delta_updates +
                backend().new_partial_stripes,
            0u);
  // A frontier stripe is not held forever: after `hold` it goes out.
  auto tail = Pattern(100, 10);
  ASSERT_TRUE(w.Write(2 * S, tail).ok());
  clock_.Advance(milliseconds(29000));
  w.FlushIdle(clock_.Now() - idle, clock_.Now() - hold);
  EXPECT_EQ(Partial(FlushReason::kIdle), 0u);
  clock_.Advance(milliseconds(1001));
  w.FlushIdle(clock_.Now() - idle, clock_.Now() - hold);
  EXPECT_EQ(Partial(FlushReason::kIdle), 1u);
  // Partial stripes below the frontier (or with holes) keep the short
  // idle timeout.
  ASSERT_TRUE(w.Write(3 * S + 10, tail).ok());   // frontier
  ASSERT_TRUE(w.Write(S + 50, tail).ok());       // below it
  ASSERT_TRUE(w.Write(3 * S + 500, tail).ok());  // frontier, now with a hole
  clock_.Advance(milliseconds(2001));
  w.FlushIdle(clock_.Now() - idle, clock_.Now() - hold);
  EXPECT_EQ(Partial(FlushReason::kIdle), 3u);
  EXPECT_FALSE(w.HasBuffered());
  std::vector<uint8_t> model;
  Put(&model, 0, first);
  Put(&model, S + S / 2, rest);
  Put(&model, 2 * S, tail);
  Put(&model, 3 * S + 10, tail);
  Put(&model, S + 50, tail);
  Put(&model, 3 * S + 500, tail);
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, IdleTimeoutFollowsTheClock) {
  StripeWriter& w = NewWriter();
  const auto idle = milliseconds(2000);
  auto a = Pattern(100, 6), b = Pattern(200, 7);
  ASSERT_TRUE(w.Write(10, a).ok());  // stripe 0 at t0
  const auto t0 = clock_.Now();
  EXPECT_EQ(w.OldestWrite(), t0);
  clock_.Advance(milliseconds(1000));
  ASSERT_TRUE(w.Write(S + 20, b).ok());  // stripe 1 at t0+1s
  EXPECT_EQ(w.OldestWrite(), t0);
  clock_.Advance(milliseconds(900));  // t0+1.9s: nothing is idle yet
  w.FlushIdle(clock_.Now() - idle);
  EXPECT_EQ(Partial(FlushReason::kIdle), 0u);
  EXPECT_EQ(w.BufferedStripes(), (std::vector<uint64_t>{0, 1}));
  clock_.Advance(milliseconds(200));  // t0+2.1s: stripe 0 is idle
  w.FlushIdle(clock_.Now() - idle);
  EXPECT_EQ(Partial(FlushReason::kIdle), 1u);
  EXPECT_EQ(w.BufferedStripes(), std::vector<uint64_t>{1});
  EXPECT_EQ(CommittedStripes(), std::vector<uint64_t>{0});
  EXPECT_EQ(w.OldestWrite(), t0 + milliseconds(1000));
  // A new write to stripe 1 makes it young again.
  clock_.Advance(milliseconds(800));  // t0+2.9s
  ASSERT_TRUE(w.Write(S + 500, a).ok());
  clock_.Advance(milliseconds(1000));  // t0+3.9s: written 1 s ago
  w.FlushIdle(clock_.Now() - idle);
  EXPECT_EQ(Partial(FlushReason::kIdle), 1u);
  clock_.Advance(milliseconds(1100));
  w.FlushIdle(clock_.Now() - idle);
  EXPECT_EQ(Partial(FlushReason::kIdle), 2u);
  EXPECT_FALSE(w.HasBuffered());
  EXPECT_EQ(w.OldestWrite(), Clock::time_point::max());
  std::vector<uint8_t> model;
  Put(&model, 10, a);
  Put(&model, S + 20, b);
  Put(&model, S + 500, a);
  // Stripe 1 lies past a gap (stripe 0 ends at byte 110): EOF stays there
  // until the fsync.
  EXPECT_EQ(CommittedSize(), 110u);
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());  // no deferred error
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, MemoryCapFlushesOldestStripeFirst) {
  StripeWriter& w = NewWriter(true, 2 * S);  // room for two buffers
  auto d = Pattern(1000, 8);
  for (uint64_t s : {5, 1, 3}) {  // written in this order
    ASSERT_TRUE(w.Write(s * S + 10, d).ok());
    clock_.Advance(milliseconds(10));
  }
  // The third buffer went over the cap: the oldest (stripe 5) was sent.
  EXPECT_EQ(Partial(FlushReason::kMemoryCap), 1u);
  EXPECT_EQ(CommittedStripes(), std::vector<uint64_t>{5});
  EXPECT_EQ(w.BufferedStripes(), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(budget_->used(), 2 * S);
  EXPECT_FALSE(budget_->over());
  // FlushOldest on demand (StripeFs's flusher across writers) goes on in
  // age order.
  EXPECT_TRUE(w.FlushOldest(FlushReason::kMemoryCap));
  EXPECT_EQ(CommittedStripes(), (std::vector<uint64_t>{1, 5}));
  EXPECT_TRUE(w.FlushOldest(FlushReason::kMemoryCap));
  EXPECT_FALSE(w.FlushOldest(FlushReason::kMemoryCap));
  EXPECT_EQ(budget_->used(), 0u);
  // Stripe 5 committed while 1 and 3 were still buffered, and none of them
  // follows committed data: EOF stays put (size follows data) until the
  // fsync raises it.
  EXPECT_EQ(CommittedSize(), 0u);  // stripe 0 is a gap: nothing sized yet
  EXPECT_EQ(w.BufferedEnd(), 5 * S + 10 + d.size());
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  std::vector<uint8_t> model;
  for (uint64_t s : {5, 1, 3}) Put(&model, s * S + 10, d);
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, ReadsOverlayBufferedBytesExactly) {
  // Committed data first (3.5 stripes), then buffered overwrites and an
  // extension past the committed end, some overlapping each other.
  std::vector<uint8_t> model = Pattern(3 * S + S / 2, 9);
  ASSERT_TRUE(client().Write(ino_, 0, model).ok());
  StripeWriter& w = NewWriter();
  std::mt19937 rng(10);
  for (int i = 0; i < 40; ++i) {
    const uint64_t off = rng() % (5 * S);
    auto d = Pattern(1 + rng() % 3000, 100 + i);
    ASSERT_TRUE(w.Write(off, d).ok());
    Put(&model, off, d);
  }
  ASSERT_TRUE(w.HasBuffered());
  for (int i = 0; i < 200; ++i) {
    const uint64_t off = rng() % (model.size() + 100);
    const size_t len = 1 + rng() % (2 * S);
    const size_t want =
        off >= model.size() ? 0 : std::min<size_t>(len, model.size() - off);
    auto got = Through(w, off, len);
    ASSERT_EQ(got.size(), want) << off << "+" << len;
    ASSERT_TRUE(std::equal(got.begin(), got.end(),
                           model.begin() + static_cast<long>(off)))
        << off << "+" << len;
  }
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Backend(), model);
  EXPECT_EQ(Through(w, 0, model.size() + 10), model);
}

TEST_F(StripeWriterTest, ReadsSeeDataInFlight) {
  StripeWriter& w = NewWriter();
  auto d = Pattern(3000, 11);
  ASSERT_TRUE(w.Write(500, d).ok());
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  std::thread flusher([&] { EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok()); });
  ASSERT_TRUE(gate.WaitEntered(1));
  // The buffer left buffers_ and is not committed: reads still see it.
  EXPECT_EQ(CommittedSize(), 0u);
  std::vector<uint8_t> model;
  Put(&model, 500, d);
  EXPECT_EQ(Through(w, 0, 2 * S), model);
  EXPECT_EQ(w.BufferedEnd(), 3500u);
  gate.Open();
  flusher.join();
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, NewestDataCommitsLastWhenAStripeIsInFlight) {
  StripeWriter& w = NewWriter();
  auto whole = Pattern(S, 12), patch = Pattern(700, 13);
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  // A whole-stripe write is held in the backend ...
  std::thread t([&] { EXPECT_TRUE(w.Write(0, whole).ok()); });
  ASSERT_TRUE(gate.WaitEntered(1));
  // ... while a newer partial write of the same stripe is buffered.
  ASSERT_TRUE(w.Write(100, patch).ok());
  std::vector<uint8_t> model = whole;
  Put(&model, 100, patch);
  EXPECT_EQ(Through(w, 0, S), model);
  std::thread f([&] { EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok()); });
  gate.Open();
  t.join();
  f.join();
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, OverlappingWritesLastWriterWins) {
  StripeWriter& w = NewWriter();
  std::vector<uint8_t> model;
  struct W {
    uint64_t off;
    size_t len;
  };
  // Overlaps inside a stripe, across a boundary, and a full-stripe write
  // over buffered bytes (which completes the buffer).
  const W ws[] = {{100, 5000},    {3000, 9000},   {0, 200},
                  {S - 50, 100},  {S + 10, 20},   {2 * S, S},
                  {2 * S + 5, 5}, {S - 100, 300}, {S / 2, 10}};
  uint32_t seed = 20;
  for (const W& x : ws) {
    auto d = Pattern(x.len, seed++);
    ASSERT_TRUE(w.Write(x.off, d).ok());
    Put(&model, x.off, d);
    ASSERT_EQ(Through(w, 0, 4 * S), model) << "after write at " << x.off;
  }
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Backend(), model);
  // Overwrite committed data with buffered bytes again.
  auto d = Pattern(4000, 99);
  ASSERT_TRUE(w.Write(S - 2000, d).ok());
  Put(&model, S - 2000, d);
  EXPECT_EQ(Through(w, 0, 4 * S), model);
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, TruncateDropsBufferedBytesPastTheNewSize) {
  std::vector<uint8_t> model = Pattern(2 * S, 30);
  ASSERT_TRUE(client().Write(ino_, 0, model).ok());
  StripeWriter& w = NewWriter();
  auto a = Pattern(5000, 31), b = Pattern(100, 32);
  ASSERT_TRUE(w.Write(S + 100, a).ok());    // crosses the new size
  ASSERT_TRUE(w.Write(3 * S + 7, b).ok());  // wholly past it
  const uint64_t writes_before = backend().new_partial_stripes +
                                 backend().rmw_stripes +
                                 backend().parity_delta_updates;
  const uint64_t new_size = S + 1000;
  auto attr = w.Truncate(new_size);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size, new_size);
  EXPECT_EQ(CommittedSize(), new_size);
  // Only the part below the new size went out, nothing for stripe 3.
  EXPECT_EQ(Partial(FlushReason::kTruncate), 1u);
  EXPECT_EQ(counters_.partial_bytes.load(), 900u);
  EXPECT_EQ(CommittedStripes(), (std::vector<uint64_t>{0, 1}));
  EXPECT_GE(backend().new_partial_stripes + backend().rmw_stripes +
                backend().parity_delta_updates,
            writes_before + 1);
  EXPECT_FALSE(w.HasBuffered());
  EXPECT_EQ(budget_->used(), 0u);
  Put(&model, S + 100, std::vector<uint8_t>(a.begin(), a.begin() + 900));
  model.resize(new_size);
  EXPECT_EQ(Through(w, 0, 4 * S), model);
  // Growing again reads zeros past the old end, also around new buffered
  // bytes.
  attr = w.Truncate(3 * S);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  model.resize(3 * S, 0);
  auto c = Pattern(10, 33);
  ASSERT_TRUE(w.Write(2 * S + 5, c).ok());
  Put(&model, 2 * S + 5, c);
  EXPECT_EQ(Through(w, 0, 4 * S), model);
  // Truncate to 0 with only buffered data: nothing is written.
  ASSERT_TRUE(w.Write(S, a).ok());
  const uint64_t flushed_bytes = counters_.partial_bytes.load();
  attr = w.Truncate(0);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(counters_.partial_bytes.load(), flushed_bytes);
  EXPECT_EQ(Partial(FlushReason::kTruncate), 1u);
  EXPECT_EQ(budget_->used(), 0u);
  EXPECT_EQ(CommittedSize(), 0u);
  EXPECT_TRUE(Through(w, 0, S).empty());
  EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok());
}

TEST_F(StripeWriterTest, BackgroundErrorIsReportedByTheNextFlushOnce) {
  StripeWriter& w = NewWriter();
  std::vector<uint8_t> model = Pattern(S / 2, 40);
  ASSERT_TRUE(w.Write(0, model).ok());
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());  // committed
  auto d = Pattern(1000, 41);
  ASSERT_TRUE(w.Write(100, d).ok());
  FailWrites(true);
  clock_.Advance(milliseconds(5000));
  w.FlushIdle(clock_.Now());  // fails in the background
  FailWrites(false);
  EXPECT_EQ(counters_.deferred_errors.load(), 1u);
  EXPECT_GE(backend().failed_writes, 1u);
  EXPECT_FALSE(w.HasBuffered());  // the data of the failed flush is dropped
  EXPECT_EQ(Through(w, 0, S), model);  // old data, never torn
  Status st = w.Flush(FlushReason::kFsync);
  EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
  EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
  EXPECT_EQ(counters_.reported_errors.load(), 1u);
  EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok());  // reported once
  // Same through the memory cap.
  StripeWriter& w2 = NewWriter(true, S / 2);
  FailWrites(true);
  ASSERT_TRUE(w2.Write(S + 1, d).ok());  // over the cap: sent, fails
  FailWrites(false);
  EXPECT_EQ(Partial(FlushReason::kMemoryCap), 1u);
  EXPECT_FALSE(w2.Flush(FlushReason::kFsync).ok());
  EXPECT_TRUE(w2.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, FailedStripeCompletionIsReportedByFlushToo) {
  // The first half of a stripe was acknowledged (buffered); the WRITE that
  // completes the stripe fails. That WRITE sees the error, and so must the
  // next fsync: acknowledged bytes of an earlier WRITE were lost.
  StripeWriter& w = NewWriter();
  auto d = Pattern(S, 42);
  ASSERT_TRUE(w.Write(0, {d.data(), S / 2}).ok());
  FailWrites(true);
  EXPECT_FALSE(w.Write(S / 2, {d.data() + S / 2, S / 2}).ok());
  FailWrites(false);
  Status st = w.Flush(FlushReason::kFsync);
  EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
  EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(CommittedSize(), 0u);
}

TEST_F(StripeWriterTest, FlushWaitingForAFailingBackgroundSendSeesItsError) {
  // A background flush takes the stripe and fails while an fsync waits for
  // that stripe: the fsync must return the error (it is recorded before
  // the stripe retires). Repeated: the window is a race in broken code.
  StripeWriter& w = NewWriter();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(w.Write(100, Pattern(1000, 50 + i)).ok());
    Gate gate;
    gate.Close();
    HookAll([&] { gate.Pass(); });
    FailWrites(true);
    clock_.Advance(milliseconds(5000));
    std::thread bg([&] { w.FlushIdle(clock_.Now()); });
    ASSERT_TRUE(gate.WaitEntered(1));
    Status st;
    std::thread fsync([&] { st = w.Flush(FlushReason::kFsync); });
    std::this_thread::sleep_for(milliseconds(2));  // let it start waiting
    gate.Open();
    bg.join();
    fsync.join();
    HookAll(nullptr);
    FailWrites(false);
    EXPECT_EQ(st.code(), ENOSPC) << "iteration " << i << ": " << st.ToString();
    EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok());
  }
}

TEST_F(StripeWriterTest, FlushIsNotStarvedByAContinuousWriter) {
  // Every backend chunk write buffers a new partial stripe (a writer that
  // never stops). Flush must send what was there when it started and
  // return, not chase the new stripes.
  StripeWriter& w = NewWriter();
  ASSERT_TRUE(w.Write(10, Pattern(100, 60)).ok());
  std::atomic<uint64_t> next{1};
  const auto d = Pattern(10, 61);
  HookAll([&] {
    const uint64_t s = next.fetch_add(1);
    if (s < 300) (void)w.Write(s * S, d);  // bounded even if Flush loops
  });
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  HookAll(nullptr);
  EXPECT_EQ(Partial(FlushReason::kFsync), 1u);
  EXPECT_EQ(CommittedStripes(), std::vector<uint64_t>{0});
  EXPECT_TRUE(w.HasBuffered());  // the newer stripes are still buffered
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
}

TEST_F(StripeWriterTest, ConcurrentWritersOnDifferentAndSameStripes) {
  StripeWriter& w = NewWriter();
  constexpr int kThreads = 4;
  constexpr uint64_t kOwnStripes = 4;  // thread t owns stripes 4t..4t+3
  const uint64_t shared_base = kThreads * kOwnStripes * S;
  // Windows in 2 shared stripes that every thread overwrites whole with its
  // own byte: each window must end up entirely one thread's.
  std::vector<std::pair<uint64_t, size_t>> windows;
  for (uint64_t o = 0; o + 3000 <= 2 * S; o += 3500)
    windows.emplace_back(shared_base + o, 3000);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(70 + t);
      auto own = Pattern(kOwnStripes * S, 80 + t);
      const uint64_t base = t * kOwnStripes * S;
      // Own region in random-size pieces, in random order.
      std::vector<std::pair<size_t, size_t>> pieces;
      for (size_t o = 0; o < own.size();) {
        size_t n = std::min<size_t>(1 + rng() % 5000, own.size() - o);
        pieces.emplace_back(o, n);
        o += n;
      }
      std::shuffle(pieces.begin(), pieces.end(), rng);
      size_t wi = 0;
      for (auto [o, n] : pieces) {
        EXPECT_TRUE(w.Write(base + o, {own.data() + o, n}).ok());
        if (wi < windows.size() * 3) {  // interleave shared writes
          auto [wo, wn] = windows[wi++ % windows.size()];
          std::vector<uint8_t> mine(wn, static_cast<uint8_t>(0xA0 + t));
          EXPECT_TRUE(w.Write(wo, mine).ok());
        }
        std::vector<uint8_t> buf(1 + rng() % 4000);
        EXPECT_TRUE(w.Read(base + rng() % own.size(), buf).ok());
      }
    });
  }
  for (auto& t : ts) t.join();
  // Every own stripe completed exactly once: one full-stripe encode each.
  EXPECT_EQ(backend().full_stripe_writes, kThreads * kOwnStripes);
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  auto check = [&](const std::vector<uint8_t>& all) {
    ASSERT_EQ(all.size(), windows.back().first + windows.back().second);
    for (int t = 0; t < kThreads; ++t) {
      auto own = Pattern(kOwnStripes * S, 80 + t);
      EXPECT_TRUE(std::equal(own.begin(), own.end(),
                             all.begin() + static_cast<long>(t * own.size())))
          << "thread " << t;
    }
    for (auto [wo, wn] : windows) {
      const uint8_t first = all[wo];
      EXPECT_GE(first, 0xA0);
      EXPECT_LT(first, 0xA0 + kThreads);
      EXPECT_TRUE(std::all_of(all.begin() + static_cast<long>(wo),
                              all.begin() + static_cast<long>(wo + wn),
                              [&](uint8_t b) { return b == first; }))
          << "window at " << wo << " mixes writers";
    }
  };
  check(Backend());
  check(Through(w, 0, 100 * S));
}

TEST_F(StripeWriterTest, ConcurrentWritersWithBackgroundFlushes) {
  // Same-file writers racing with idle and memory-cap flushes (as
  // StripeFs's flusher thread does them): the result is still exact.
  StripeWriter& w = NewWriter(true, 3 * S);
  constexpr int kThreads = 3;
  const uint64_t region = 6 * S;
  std::atomic<bool> stop{false};
  std::thread bg([&] {
    while (!stop.load()) {
      clock_.Advance(milliseconds(7));
      w.FlushIdle(clock_.Now() - milliseconds(20));
      (void)w.FlushOldest(FlushReason::kMemoryCap);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      // Interleaved 1000-byte blocks: neighbours share every stripe.
      for (uint64_t b = t; b * 1000 < region; b += kThreads) {
        const size_t n = std::min<uint64_t>(1000, region - b * 1000);
        auto d = Pattern(n, static_cast<uint32_t>(500 + b));
        EXPECT_TRUE(w.Write(b * 1000, d).ok());
      }
    });
  }
  for (auto& t : ts) t.join();
  stop = true;
  bg.join();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  std::vector<uint8_t> model;
  for (uint64_t b = 0; b * 1000 < region; ++b) {
    const size_t n = std::min<uint64_t>(1000, region - b * 1000);
    Put(&model, b * 1000, Pattern(n, static_cast<uint32_t>(500 + b)));
  }
  EXPECT_EQ(Backend(), model);
  EXPECT_EQ(budget_->used(), 0u);
  EXPECT_EQ(counters_.deferred_errors.load(), 0u);
}

TEST_F(StripeWriterTest, CoalescingOffWritesThrough) {
  StripeWriter& w = NewWriter(false);
  auto d = Pattern(3000, 90);
  ASSERT_TRUE(w.Write(100, d).ok());
  EXPECT_EQ(counters_.write_through.load(), 1u);
  EXPECT_FALSE(w.HasBuffered());
  EXPECT_EQ(backend().new_partial_stripes, 1u);
  ASSERT_TRUE(w.Write(3100, d).ok());
  EXPECT_EQ(backend().rmw_stripes + backend().parity_delta_updates, 1u);
  std::vector<uint8_t> model;
  Put(&model, 100, d);
  Put(&model, 3100, d);
  EXPECT_EQ(Backend(), model);
  EXPECT_EQ(Through(w, 0, S), model);
}

// ---- pipelined sends (StripeSender) ----

TEST_F(StripeWriterTest, PipelinedWriteIsAcknowledgedOnceBuffered) {
  StripeWriter& w = NewPipelinedWriter(4, 8);
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  auto d = Pattern(3 * S, 70);
  // Three whole stripes return while the backend holds every chunk write.
  ASSERT_TRUE(w.Write(0, d).ok());
  ASSERT_TRUE(gate.WaitEntered(1));
  EXPECT_EQ(CommittedSize(), 0u);
  EXPECT_EQ(w.BufferedEnd(), 3 * S);
  EXPECT_EQ(Through(w, 0, 3 * S), d);  // in-flight data reads back
  std::atomic<bool> synced{false};
  std::thread fsync([&] {
    EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok());
    synced = true;
  });
  gate.Open();
  fsync.join();
  EXPECT_TRUE(synced.load());
  EXPECT_EQ(CommittedSize(), 3 * S);
  EXPECT_EQ(Backend(), d);
  EXPECT_EQ(counters_.full_from_buffer.load(), 3u);
}

// A pipelined whole-stripe WRITE whose caller hands its buffer over
// (FUSE: the kept request buffer) is sent from that buffer, uncopied and
// outside the memory budget; the writer holds the lease until the send
// retires. A refused keep copies, so the caller may reuse its memory at
// once.
TEST_F(StripeWriterTest, PipelinedWholeStripesAreSentFromAKeptBuffer) {
  StripeWriter& w = NewPipelinedWriter(4, 8);
  BufferPool requests(2 * S, 4);
  auto d = Pattern(2 * S, 75);
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  {
    BufferPool::Lease req = requests.Get();
    std::copy(d.begin(), d.end(), req.data());
    const std::span<const uint8_t> data(req.data(), d.size());
    int keeps = 0;
    ASSERT_TRUE(w.Write(0, data, [&] {
                   ++keeps;
                   return std::move(req);
                 }).ok());
    EXPECT_EQ(keeps, 1);  // one lease for both stripes of the WRITE
    EXPECT_TRUE(req.empty());
  }
  ASSERT_TRUE(gate.WaitEntered(1));
  EXPECT_EQ(requests.outstanding(), 1u);  // held by the sends in flight
  EXPECT_EQ(budget_->used(), 0u);
  EXPECT_EQ(Through(w, 0, 2 * S), d);
  gate.Open();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(requests.outstanding(), 0u);  // given back when they retired
  EXPECT_EQ(counters_.full_direct.load(), 2u);
  EXPECT_EQ(counters_.full_from_buffer.load(), 0u);
  EXPECT_EQ(counters_.keep_refused.load(), 0u);
  EXPECT_EQ(Backend(), d);

  // Refused: copied before Write() returns; the caller's reuse of its
  // memory changes nothing.
  auto e = Pattern(S, 76);
  std::vector<uint8_t> mem = e;
  gate.Close();
  ASSERT_TRUE(w.Write(2 * S, mem, [] { return BufferPool::Lease(); }).ok());
  std::fill(mem.begin(), mem.end(), 0xEE);
  gate.Open();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(counters_.keep_refused.load(), 1u);
  EXPECT_EQ(counters_.full_from_buffer.load(), 1u);
  d.insert(d.end(), e.begin(), e.end());
  EXPECT_EQ(Backend(), d);
}

TEST_F(StripeWriterTest, FullFileWindowMakesWritesWait) {
  StripeWriter& w = NewPipelinedWriter(2, 8);
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  ASSERT_TRUE(w.Write(0, Pattern(2 * S, 71)).ok());  // fills the window
  std::atomic<bool> third_done{false};
  std::thread third([&] {
    EXPECT_TRUE(w.Write(2 * S, Pattern(S, 72)).ok());
    third_done = true;
  });
  // The third stripe waits for a window slot; its bytes are buffered (one
  // more stripe of memory), no more.
  for (int i = 0; i < 30000 && counters_.file_window_waits.load() == 0; ++i)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(counters_.file_window_waits.load(), 1u);
  EXPECT_FALSE(third_done.load());  // cannot finish: the window is held
  EXPECT_LE(budget_->used(), 3 * S);
  gate.Open();
  third.join();
  EXPECT_TRUE(third_done.load());
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(CommittedSize(), 3 * S);
  EXPECT_EQ(budget_->used(), 0u);
}

TEST_F(StripeWriterTest, FullMountWindowMakesWritesWait) {
  StripeWriter& w = NewPipelinedWriter(8, 1);
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  ASSERT_TRUE(w.Write(0, Pattern(S, 73)).ok());
  std::atomic<bool> second_done{false};
  std::thread second([&] {
    EXPECT_TRUE(w.Write(S, Pattern(S, 74)).ok());
    second_done = true;
  });
  for (int i = 0; i < 30000 && sender_->full_waits() == 0; ++i)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(sender_->full_waits(), 1u);
  EXPECT_FALSE(second_done.load());
  gate.Open();
  second.join();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(CommittedSize(), 2 * S);
}

TEST_F(StripeWriterTest, PipelinedErrorIsReportedByTheNextFsyncOnce) {
  StripeWriter& w = NewPipelinedWriter(4, 8);
  FailWrites(true);
  ASSERT_TRUE(w.Write(0, Pattern(S, 75)).ok());  // acknowledged, then fails
  Status st = w.Flush(FlushReason::kFsync);
  FailWrites(false);
  EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
  EXPECT_EQ(counters_.reported_errors.load(), 1u);
  EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok());  // reported once
  EXPECT_EQ(CommittedSize(), 0u);
  // A later good write still goes through.
  auto d = Pattern(S, 76);
  ASSERT_TRUE(w.Write(0, d).ok());
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Backend(), d);
}

TEST_F(StripeWriterTest, PipelinedRewritesOfAStripeCommitInOrder) {
  StripeWriter& w = NewPipelinedWriter(8, 8);
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  auto a = Pattern(S, 77), b = Pattern(S, 78);
  ASSERT_TRUE(w.Write(0, a).ok());  // in flight, held
  ASSERT_TRUE(gate.WaitEntered(1));
  // The rewrite waits for the first send of its stripe to retire.
  std::thread rewrite([&] { EXPECT_TRUE(w.Write(0, b).ok()); });
  gate.Open();
  rewrite.join();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(Backend(), b);
}

TEST_F(StripeWriterTest, CommittedSizeNeverCoversAPendingLowerStripe) {
  // Stripe 0's chunk writes are held; stripes 1..3 commit meanwhile. The
  // committed size must stay at stripe 0's start (a crash now must not
  // leave stripe 0 inside the file as zeros), then reach the end on fsync.
  StripeWriter& w = NewPipelinedWriter(8, 8);
  Gate gate;
  gate.Close();
  HookIds([&](const ChunkId& id) {
    if (id.stripe == 0) gate.Pass();
  });
  auto d = Pattern(4 * S, 79);
  ASSERT_TRUE(w.Write(0, d).ok());
  ASSERT_TRUE(gate.WaitEntered(1));
  for (int i = 0; i < 30000 && CommittedStripes().size() < 3; ++i)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(CommittedStripes(), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(CommittedSize(), 0u);
  EXPECT_EQ(w.BufferedEnd(), 4 * S);
  EXPECT_EQ(Through(w, 0, 4 * S), d);
  EXPECT_GE(counters_.capped_commits.load(), 3u);
  gate.Open();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(CommittedSize(), 4 * S);
  EXPECT_EQ(Backend(), d);
}

TEST_F(StripeWriterTest, SizeFollowsDataWithoutPipeliningToo) {
  // Two threads complete stripes 0 and 1 concurrently (as FUSE worker
  // threads do); stripe 0 is held in the backend: stripe 1's commit must
  // not raise the size over it.
  StripeWriter& w = NewWriter();
  Gate gate;
  gate.Close();
  HookIds([&](const ChunkId& id) {
    if (id.stripe == 0) gate.Pass();
  });
  auto d = Pattern(2 * S, 80);
  ASSERT_TRUE(w.Write(0, {d.data(), S / 2}).ok());
  ASSERT_TRUE(w.Write(S, {d.data() + S, S / 2}).ok());
  std::thread first([&] {
    EXPECT_TRUE(w.Write(S / 2, {d.data() + S / 2, S / 2}).ok());
  });
  ASSERT_TRUE(gate.WaitEntered(1));
  ASSERT_TRUE(w.Write(S + S / 2, {d.data() + S + S / 2, S / 2}).ok());
  EXPECT_EQ(CommittedStripes(), std::vector<uint64_t>{1});
  EXPECT_EQ(CommittedSize(), 0u);
  gate.Open();
  first.join();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(CommittedSize(), 2 * S);
  EXPECT_EQ(Backend(), d);
}

TEST_F(StripeWriterTest, FsyncSendsDirtyStripesInParallel) {
  StripeWriter& w = NewPipelinedWriter(8, 8);
  for (uint64_t s = 0; s < 4; ++s)
    ASSERT_TRUE(w.Write(s * S + 10, Pattern(100, 81 + s)).ok());
  Gate gate;
  gate.Close();
  HookAll([&] { gate.Pass(); });
  std::thread fsync([&] { EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok()); });
  // One stripe write is at most k+m chunk writes: more than that held at
  // once means several stripes are in flight together.
  EXPECT_TRUE(gate.WaitEntered(7));
  gate.Open();
  fsync.join();
  EXPECT_EQ(Partial(FlushReason::kFsync), 4u);
  EXPECT_EQ(CommittedStripes(), (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST_F(StripeWriterTest, FsyncOfManyDirtyStripesIsOneCommit) {
  // Six committed stripes, then small writes into each (several per
  // stripe, in different cells), then one fsync: one metadata commit, one
  // new version per stripe, each a parity delta (not one RMW per range).
  StripeWriter& w = NewPipelinedWriter(8, 16);
  std::vector<uint8_t> model = Pattern(6 * S, 100);
  ASSERT_TRUE(w.Write(0, model).ok());
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  auto committed_versions = [&] {
    std::vector<uint64_t> v;
    auto svs = meta().GetStripes(ino_, 0, 100);
    EXPECT_TRUE(svs.ok());
    if (svs.ok())
      for (const auto& sv : *svs) v.push_back(sv.version);
    return v;
  };
  const auto versions = committed_versions();
  ASSERT_EQ(versions.size(), 6u);
  for (uint64_t s = 0; s < 6; ++s) {
    for (uint64_t off : {s * S + 100, s * S + 4096 + 7, s * S + 3 * 4096}) {
      auto d = Pattern(64, static_cast<uint32_t>(off));
      ASSERT_TRUE(w.Write(off, d).ok());
      Put(&model, off, d);
    }
  }
  const int commits = counting_->commit_calls;
  const int stripes = counting_->stripes_committed;
  const auto before = backend();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  EXPECT_EQ(counting_->commit_calls - commits, 1);
  EXPECT_EQ(counting_->stripes_committed - stripes, 6);
  const auto after = backend();
  EXPECT_EQ(after.parity_delta_updates - before.parity_delta_updates, 6u);
  EXPECT_EQ(after.rmw_stripes - before.rmw_stripes, 0u);
  EXPECT_EQ(Partial(FlushReason::kFsync), 6u);
  const auto now = committed_versions();
  ASSERT_EQ(now.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_NE(now[i], versions[i]);
  EXPECT_EQ(Backend(), model);
  EXPECT_EQ(CommittedSize(), 6 * S);
}

TEST_F(StripeWriterTest, FsyncBatchKeepsTheSizeBelowAGap) {
  // Dirty stripes 0 and 3 of an empty file, stripe 1 in flight elsewhere
  // (held): the batch commits 0 and 3 together, but EOF stays at the end of
  // stripe 0's data until stripe 1 is in; then Flush raises it.
  StripeWriter& w = NewPipelinedWriter(8, 16);
  Gate gate;
  std::atomic<bool> hold{true};
  HookIds([&](const ChunkId& id) {
    if (id.stripe == 1 && hold) gate.Pass();
  });
  gate.Close();
  auto whole = Pattern(S, 7);
  ASSERT_TRUE(w.Write(S, whole).ok());  // completes stripe 1: sent, held
  ASSERT_TRUE(gate.WaitEntered(1));
  auto a = Pattern(100, 8), b = Pattern(100, 9);
  ASSERT_TRUE(w.Write(10, a).ok());
  ASSERT_TRUE(w.Write(3 * S + 10, b).ok());
  hold = false;
  std::thread fsync([&] { EXPECT_TRUE(w.Flush(FlushReason::kFsync).ok()); });
  // Bounded wait until stripes 0 and 3 are committed (stripe 1 is held).
  for (int i = 0; i < 3000 && CommittedStripes().size() < 2; ++i)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(CommittedStripes(), (std::vector<uint64_t>{0, 3}));
  EXPECT_LE(CommittedSize(), S);  // never past the pending stripe 1
  gate.Open();
  fsync.join();
  EXPECT_EQ(CommittedStripes(), (std::vector<uint64_t>{0, 1, 3}));
  EXPECT_EQ(CommittedSize(), 3 * S + 110);
  std::vector<uint8_t> model;
  Put(&model, 10, a);
  Put(&model, S, whole);
  Put(&model, 3 * S + 10, b);
  EXPECT_EQ(Backend(), model);
}

TEST_F(StripeWriterTest, PipelinedConcurrentWritersReadBackExactly) {
  StripeWriter& w = NewPipelinedWriter(3, 4, 8 * S);
  std::vector<uint8_t> model(32 * S);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(90 + t);
      for (int i = 0; i < 40; ++i) {
        // Each thread owns every 4th stripe: no overlap between threads.
        const uint64_t s = static_cast<uint64_t>(t + 4 * (rng() % 8));
        const uint64_t off = s * S + rng() % S;
        const size_t len = 1 + rng() % (s * S + S - off);
        auto d = Pattern(len, static_cast<uint32_t>(1000 * t + i));
        std::copy(d.begin(), d.end(), model.begin() + static_cast<long>(off));
        EXPECT_TRUE(w.Write(off, d).ok());
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_TRUE(w.Flush(FlushReason::kFsync).ok());
  auto got = Backend();
  model.resize(got.size());
  EXPECT_EQ(got, model);
  EXPECT_EQ(budget_->used(), 0u);
}

}  // namespace
}  // namespace stripefs::fs

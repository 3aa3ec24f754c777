// Asynchronous READs on io-uring queues (UringTransport read workers):
// several READs of one queue are in the file system at once and each reply
// carries its own data; a READ interrupted or dropped by the file system
// answers EINTR/EIO; replies from threads that exit right after do not cost
// ring entries; unmounting while READs are held leaves no thread or fd.
// Needs root, /dev/fuse and the fuse module's enable_uring (set and
// restored by MountedSession); skips loudly otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fuse/uring_transport.h"
#include "tests/fuse/mem_fs.h"
#include "tests/fuse/mounted_session.h"
#include "tests/support/process_counts.h"
#include "tests/support/random_bytes.h"

namespace stripefs::fuse {
namespace {

using testing::MemFs;
using testing::MountedSession;

constexpr size_t kBlock = 4096;
constexpr int kWorkers = 4;
// Upper bound for any wait in these tests (a hang fails, never a slow run).
constexpr auto kPatience = std::chrono::seconds(20);

enum class ReadMode {
  kGate,           // hold READs until Open() or an INTERRUPT
  kDropAtOffset0,  // drop the Replier of a READ at offset 0 (EIO)
  kShortThread,    // answer from a thread that exits right after
};

// MemFs whose READs can be held in the file system, dropped, or answered
// from a thread that then exits.
class HeldReadFs : public MemFs {
 public:
  explicit HeldReadFs(ReadMode mode) : mode_(mode) {}

  void Read(Replier r, uint64_t nodeid,
            const fuse_abi::fuse_read_in& in) override {
    if (mode_ == ReadMode::kDropAtOffset0 && in.offset == 0) return;
    if (mode_ == ReadMode::kShortThread) {
      std::thread t([this, rp = std::move(r), nodeid, in]() mutable {
        MemFs::Read(std::move(rp), nodeid, in);
      });
      t.join();  // the replying thread is gone before the next request
      return;
    }
    if (mode_ == ReadMode::kGate) {
      std::unique_lock<std::mutex> lock(mu_);
      ++held_;
      max_held_ = std::max(max_held_, held_);
      cv_.notify_all();
      cv_.wait_for(lock, kPatience, [&] { return open_ || r.interrupted(); });
      --held_;
      if (!open_ && r.interrupted()) {
        ++interrupted_;
        lock.unlock();
        return r.Error(EINTR);
      }
    }
    MemFs::Read(std::move(r), nodeid, in);
  }

  // Called by the Session after it marked the request interrupted.
  void Interrupt(uint64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

  // Waits until `n` READs are held at once; false after kPatience.
  bool WaitHeld(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return held_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int max_held() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_held_;
  }
  int interrupted() {
    std::lock_guard<std::mutex> lock(mu_);
    return interrupted_;
  }

 private:
  const ReadMode mode_;
  std::mutex mu_;
  std::condition_variable cv_;
  int held_ = 0, max_held_ = 0, interrupted_ = 0;
  bool open_ = false;
};

// HeldReadFs (open: no holding) that honours ctx.must_not_block: a tried
// READ of an even block is served at once (from memory), one of an odd
// block is given back (Replier::WouldBlock); retried READs are served. It
// records which threads tried and which served the retries.
class TryingFs : public HeldReadFs {
 public:
  TryingFs() : HeldReadFs(ReadMode::kGate) { Open(); }

  void Read(Replier r, uint64_t nodeid,
            const fuse_abi::fuse_read_in& in) override {
    const RequestContext c = r.ctx();
    const bool give_back = c.must_not_block && (in.offset / kBlock) % 2 == 1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (c.must_not_block) ++tried_;
      if (c.retried) ++retried_;
      if (c.must_not_block && c.retried) ++tried_twice_;
      if (give_back) {
        ++given_back_;
        try_thread_[c.unique] = std::this_thread::get_id();
      }
      if (c.retried && try_thread_.count(c.unique) &&
          try_thread_[c.unique] == std::this_thread::get_id())
        ++retried_on_trying_thread_;
    }
    if (give_back) return r.WouldBlock();
    HeldReadFs::Read(std::move(r), nodeid, in);
  }
  struct Counts {
    int tried, retried, tried_twice, given_back, retried_on_trying_thread;
  };
  Counts counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return {tried_, retried_, tried_twice_, given_back_,
            retried_on_trying_thread_};
  }

 private:
  std::mutex mu_;
  int tried_ = 0, retried_ = 0, tried_twice_ = 0, given_back_ = 0;
  int retried_on_trying_thread_ = 0;
  std::map<uint64_t, std::thread::id> try_thread_;  // unique -> thread
};

void PinToCpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  ::sched_setaffinity(0, sizeof(set), &set);
}

// One O_DIRECT open file and an aligned 4 KiB buffer: each Read() is one
// READ, sent by the calling thread. Read() returns pread's result and
// keeps its errno in err().
class DirectReader {
 public:
  explicit DirectReader(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_DIRECT)),
        buf_(static_cast<uint8_t*>(std::aligned_alloc(kBlock, kBlock))) {}
  ~DirectReader() {
    if (fd_ >= 0) ::close(fd_);
    std::free(buf_);
  }
  DirectReader(const DirectReader&) = delete;
  DirectReader& operator=(const DirectReader&) = delete;
  bool ok() const { return fd_ >= 0 && buf_ != nullptr; }
  ssize_t Read(size_t block) {
    if (!ok()) return -1;
    ssize_t n = ::pread(fd_, buf_, kBlock, static_cast<off_t>(block * kBlock));
    err_ = n < 0 ? errno : 0;
    return n;
  }
  int err() const { return err_; }
  // Whether the buffer holds block `block` of `data`.
  bool Holds(const std::vector<uint8_t>& data, size_t block) const {
    return std::memcmp(buf_, data.data() + block * kBlock, kBlock) == 0;
  }

 private:
  int fd_;
  uint8_t* buf_;
  int err_ = 0;
};

class UringRead : public ::testing::Test {
 protected:
  // `async_dio` false: an O_DIRECT read waits for its READ in the caller,
  // interruptibly (with FUSE_ASYNC_DIO it waits uninterruptibly).
  // `inline_lone`: a READ alone on an idle queue is served on the queue
  // thread (the default); false hands every READ to the workers.
  // `try_reads`: SessionOptions::uring_try_reads, and a TryingFs instead
  // of a HeldReadFs in `mode`.
  void Mount(ReadMode mode, bool async_dio = true, bool inline_lone = true,
             std::optional<bool> try_reads = std::nullopt) {
    const std::string why = testing::UringSkipReason();
    if (!why.empty()) GTEST_SKIP() << "SKIPPED (loudly): " << why;
    tasks_before_ = stripefs::testing::CountThreads();
    fds_before_ = stripefs::testing::CountFds();
    if (try_reads) {
      fs_ = std::make_unique<TryingFs>();
    } else {
      fs_ = std::make_unique<HeldReadFs>(mode);
    }
    SessionOptions o;
    o.transport = TransportChoice::kUring;
    o.uring_read_workers = kWorkers;
    o.uring_inline_lone_reads = inline_lone;
    o.uring_try_reads = try_reads.value_or(false);
    o.init.async_dio = async_dio;
    auto m = MountedSession::Start(fs_.get(), o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    m_ = std::move(*m);
    ASSERT_EQ(m_->session().active_transport(), "uring");
  }
  void TearDown() override {
    m_.reset();
    fs_.reset();
  }
  // A file of `blocks` distinct 4 KiB blocks, written and fsynced.
  std::vector<uint8_t> PutFile(const std::string& name, size_t blocks) {
    std::vector<uint8_t> d = stripefs::testing::RandomBytes(blocks * kBlock, 7);
    int fd = ::open(m_->Path(name).c_str(), O_CREAT | O_WRONLY, 0644);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::pwrite(fd, d.data(), d.size(), 0),
              static_cast<ssize_t>(d.size()));
    EXPECT_EQ(::fsync(fd), 0);
    ::close(fd);
    return d;
  }
  // Blocks [0, blocks) of `name` read in order with O_DIRECT, each byte-exact.
  void ReadInOrder(const std::string& name, size_t blocks,
                   const std::vector<uint8_t>& data) {
    DirectReader r(m_->Path(name));
    ASSERT_TRUE(r.ok()) << std::strerror(errno);
    for (size_t b = 0; b < blocks; ++b) {
      ASSERT_EQ(r.Read(b), static_cast<ssize_t>(kBlock)) << "block " << b;
      EXPECT_TRUE(r.Holds(data, b)) << "block " << b;
    }
  }

  int tasks_before_ = 0, fds_before_ = 0;
  std::unique_ptr<HeldReadFs> fs_;
  std::unique_ptr<MountedSession> m_;
};

// Readers on one CPU all reach queue 0; with workers its READs are served
// at once, and every reply holds the bytes of its own offset. Every READ is
// handed over here: a gated READ served inline (alone on an idle queue)
// would hold the queue thread, which is that mode's documented limit.
TEST_F(UringRead, ReadsOfOneQueueAreServedConcurrently) {
  Mount(ReadMode::kGate, /*async_dio=*/true, /*inline_lone=*/false);
  if (IsSkipped()) return;
  constexpr int kReaders = kWorkers;
  const auto data = PutFile("f", kReaders);
  std::vector<ssize_t> n(kReaders, -1);
  std::vector<char> right(kReaders, 0);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      PinToCpu0();
      DirectReader r(m_->Path("f"));
      n[i] = r.Read(static_cast<size_t>(i));
      right[i] = r.Holds(data, static_cast<size_t>(i));
    });
  }
  const bool all_held = fs_->WaitHeld(kReaders);
  fs_->Open();
  for (auto& t : readers) t.join();
  EXPECT_TRUE(all_held) << "only " << fs_->max_held()
                        << " READs were in the file system at once";
  const EngineStats s = m_->session().Stats();
  EXPECT_EQ(s.uring_reads_inline, 0u);
  EXPECT_GE(s.uring_reads_handed, static_cast<uint64_t>(kReaders));
  for (int i = 0; i < kReaders; ++i) {
    ASSERT_EQ(n[i], static_cast<ssize_t>(kBlock)) << "reader " << i;
    EXPECT_TRUE(right[i]) << "reader " << i << " got another block";
  }
}

// One reader at QD1: each READ arrives alone on an idle queue and is served
// on the queue thread, without a hand-over to a worker, byte-exact. (A READ
// that happens to arrive together with another request is handed over, so
// the count is bounded from below, not exact.)
TEST_F(UringRead, LoneReadsAreServedOnTheQueueThread) {
  Mount(ReadMode::kGate);
  if (IsSkipped()) return;
  fs_->Open();  // no holding
  constexpr size_t kBlocks = 32;
  const auto data = PutFile("f", kBlocks);
  const EngineStats before = m_->session().Stats();
  ReadInOrder("f", kBlocks, data);
  if (HasFatalFailure()) return;
  const EngineStats after = m_->session().Stats();
  const uint64_t in_line = after.uring_reads_inline - before.uring_reads_inline;
  const uint64_t handed = after.uring_reads_handed - before.uring_reads_handed;
  EXPECT_GE(in_line + handed, kBlocks);
  EXPECT_GE(in_line, kBlocks / 2) << handed << " READs were handed over";
}

// With try_reads, a READ for the workers is first run on its queue thread
// with ctx.must_not_block: the file system serves it there (even blocks)
// or gives it back (odd blocks), and a given-back READ is dispatched once
// more, retried, on a worker thread, and answered with its own bytes. No
// READ is tried twice or handed over untried; the engine's counters match
// the file system's.
TEST_F(UringRead, TriedReadsAreServedInlineOrGivenBackToTheWorkers) {
  Mount(ReadMode::kGate, /*async_dio=*/true, /*inline_lone=*/false,
        /*try_reads=*/true);
  if (IsSkipped()) return;
  auto& fs = static_cast<TryingFs&>(*fs_);
  constexpr size_t kBlocks = 32;
  const auto data = PutFile("f", kBlocks);
  const EngineStats before = m_->session().Stats();
  const TryingFs::Counts fs_before = fs.counts();
  ReadInOrder("f", kBlocks, data);
  if (HasFatalFailure()) return;
  const EngineStats after = m_->session().Stats();
  const TryingFs::Counts c = fs.counts();
  const uint64_t tries = after.uring_read_tries - before.uring_read_tries;
  const uint64_t back =
      after.uring_read_would_block - before.uring_read_would_block;
  EXPECT_GE(tries, kBlocks);
  EXPECT_EQ(tries, static_cast<uint64_t>(c.tried - fs_before.tried));
  EXPECT_GE(back, kBlocks / 2);
  EXPECT_EQ(back, static_cast<uint64_t>(c.given_back - fs_before.given_back));
  EXPECT_EQ(c.retried - fs_before.retried, c.given_back - fs_before.given_back);
  EXPECT_EQ(c.tried_twice, 0);
  EXPECT_EQ(c.retried_on_trying_thread, 0)
      << "given-back READs were served again on the thread that tried them";
  EXPECT_EQ(after.uring_reads_handed, before.uring_reads_handed)
      << "READs were handed over without a try";
  // Each READ counted once per opcode, however often it was dispatched.
  EXPECT_EQ(after.per_opcode[fuse_abi::FUSE_READ] -
                before.per_opcode[fuse_abi::FUSE_READ],
            tries);
}

// Without try_reads (the engine's default: only a file system that honours
// must_not_block asks for it) no READ is tried: they are handed over.
TEST_F(UringRead, ReadsAreNotTriedUnlessAsked) {
  Mount(ReadMode::kGate, /*async_dio=*/true, /*inline_lone=*/false,
        /*try_reads=*/false);
  if (IsSkipped()) return;
  auto& fs = static_cast<TryingFs&>(*fs_);
  constexpr size_t kBlocks = 16;
  const auto data = PutFile("f", kBlocks);
  const EngineStats before = m_->session().Stats();
  ReadInOrder("f", kBlocks, data);
  if (HasFatalFailure()) return;
  const EngineStats after = m_->session().Stats();
  EXPECT_EQ(after.uring_read_tries, 0u);
  EXPECT_EQ(after.uring_read_would_block, 0u);
  EXPECT_EQ(fs.counts().tried, 0);
  EXPECT_GE(after.uring_reads_handed - before.uring_reads_handed, kBlocks);
}

// Many more READs than entries and workers, from both CPUs: all correct.
TEST_F(UringRead, ManyConcurrentReadsReturnTheirOwnData) {
  Mount(ReadMode::kGate);
  if (IsSkipped()) return;
  fs_->Open();  // no holding
  constexpr size_t kBlocks = 64;
  const auto data = PutFile("f", kBlocks);
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      DirectReader r(m_->Path("f"));
      for (size_t i = 0; i < 4 * kBlocks; ++i) {
        size_t b = (i * 7 + static_cast<size_t>(t) * 13) % kBlocks;
        if (r.Read(b) != static_cast<ssize_t>(kBlock) || !r.Holds(data, b))
          bad.fetch_add(1);
      }
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// The kernel cancels an entry whose last commit came from a thread that
// exited; replies from such threads are committed by the queue thread, so
// far more READs than the ring has entries still complete.
TEST_F(UringRead, RepliesFromExitedThreadsKeepTheEntries) {
  Mount(ReadMode::kShortThread);
  if (IsSkipped()) return;
  const auto data = PutFile("f", 4);
  DirectReader r(m_->Path("f"));
  ASSERT_TRUE(r.ok()) << std::strerror(errno);
  const int reads = 8 * m_->session().Stats().uring_depth + 8;
  int good = 0;
  for (int i = 0; i < reads; ++i) {
    size_t b = static_cast<size_t>(i) % 4;
    if (r.Read(b) == static_cast<ssize_t>(kBlock) && r.Holds(data, b)) ++good;
  }
  EXPECT_EQ(good, reads);
}

// A dropped Replier answers EIO; the next READ still works.
TEST_F(UringRead, DroppedReadAnswersEio) {
  Mount(ReadMode::kDropAtOffset0);
  if (IsSkipped()) return;
  const auto data = PutFile("f", 2);
  DirectReader r(m_->Path("f"));
  ASSERT_TRUE(r.ok()) << std::strerror(errno);
  EXPECT_EQ(r.Read(0), -1);
  EXPECT_EQ(r.err(), EIO);
  EXPECT_EQ(r.Read(1), static_cast<ssize_t>(kBlock));
  EXPECT_TRUE(r.Holds(data, 1));
}

void NoopHandler(int) {}

// A signal to a reader blocked in a held READ makes the kernel send
// INTERRUPT; the worker sees interrupted() and answers EINTR.
TEST_F(UringRead, InterruptedReadAnswersEintr) {
  Mount(ReadMode::kGate, /*async_dio=*/false);
  if (IsSkipped()) return;
  PutFile("f", 1);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = NoopHandler;  // no SA_RESTART: the read returns EINTR
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  std::atomic<ssize_t> n{0};
  std::atomic<int> err{0};
  std::thread reader([&] {
    DirectReader r(m_->Path("f"));
    n = r.Read(0);
    err = r.err();
  });
  const bool held = fs_->WaitHeld(1);
  EXPECT_TRUE(held);
  ASSERT_EQ(::pthread_kill(reader.native_handle(), SIGUSR1), 0);
  reader.join();  // the gate gives up after kPatience at worst
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(fs_->interrupted(), 1);
  EXPECT_EQ(n.load(), -1);
  EXPECT_EQ(err.load(), EINTR);
}

// Unmount (lazily, as `umount -l` would) while READs are held in workers
// (every READ handed over, so that all of them are held at once):
// once they are released the session ends, and no transport thread, ring
// or eventfd is left.
TEST_F(UringRead, UnmountWithReadsInFlightLeavesNothingBehind) {
  Mount(ReadMode::kGate, /*async_dio=*/true, /*inline_lone=*/false);
  if (IsSkipped()) return;
  PutFile("f", kWorkers);
  std::vector<std::thread> readers;
  for (int i = 0; i < kWorkers; ++i) {
    readers.emplace_back([&, i] {
      DirectReader r(m_->Path("f"));
      [[maybe_unused]] ssize_t n = r.Read(static_cast<size_t>(i));
    });
  }
  EXPECT_TRUE(fs_->WaitHeld(kWorkers));
  ASSERT_TRUE(UnmountPath(m_->dir(), /*lazy=*/true).ok());
  fs_->Open();
  for (auto& t : readers) t.join();
  m_->Teardown();
  EXPECT_EQ(stripefs::testing::CountThreads(), tasks_before_);
  EXPECT_EQ(stripefs::testing::CountFds(), fds_before_);
}

}  // namespace
}  // namespace stripefs::fuse

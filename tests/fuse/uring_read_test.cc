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
#include <cstring>
#include <mutex>
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

void PinToCpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  ::sched_setaffinity(0, sizeof(set), &set);
}

class UringRead : public ::testing::Test {
 protected:
  // `async_dio` false: an O_DIRECT read waits for its READ in the caller,
  // interruptibly (with FUSE_ASYNC_DIO it waits uninterruptibly).
  void Mount(ReadMode mode, bool async_dio = true) {
    const std::string why = testing::UringSkipReason();
    if (!why.empty()) GTEST_SKIP() << "SKIPPED (loudly): " << why;
    tasks_before_ = stripefs::testing::CountThreads();
    fds_before_ = stripefs::testing::CountFds();
    fs_ = std::make_unique<HeldReadFs>(mode);
    SessionOptions o;
    o.transport = TransportChoice::kUring;
    o.uring_read_workers = kWorkers;
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
  // O_DIRECT: each pread is one READ, sent by the calling thread.
  int OpenDirect(const std::string& name) {
    return ::open(m_->Path(name).c_str(), O_RDONLY | O_DIRECT);
  }

  int tasks_before_ = 0, fds_before_ = 0;
  std::unique_ptr<HeldReadFs> fs_;
  std::unique_ptr<MountedSession> m_;
};

// Readers on one CPU all reach queue 0; with workers its READs are served
// at once, and every reply holds the bytes of its own offset.
TEST_F(UringRead, ReadsOfOneQueueAreServedConcurrently) {
  Mount(ReadMode::kGate);
  if (IsSkipped()) return;
  constexpr int kReaders = kWorkers;
  const auto data = PutFile("f", kReaders);
  std::vector<std::vector<uint8_t>> got(kReaders, std::vector<uint8_t>(kBlock));
  std::vector<ssize_t> n(kReaders, -1);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      PinToCpu0();
      int fd = OpenDirect("f");
      if (fd < 0) return;
      void* buf = nullptr;
      if (::posix_memalign(&buf, kBlock, kBlock) == 0) {
        n[i] = ::pread(fd, buf, kBlock, static_cast<off_t>(i * kBlock));
        std::memcpy(got[i].data(), buf, kBlock);
        std::free(buf);
      }
      ::close(fd);
    });
  }
  const bool all_held = fs_->WaitHeld(kReaders);
  fs_->Open();
  for (auto& t : readers) t.join();
  EXPECT_TRUE(all_held) << "only " << fs_->max_held()
                        << " READs were in the file system at once";
  for (int i = 0; i < kReaders; ++i) {
    ASSERT_EQ(n[i], static_cast<ssize_t>(kBlock)) << "reader " << i;
    EXPECT_TRUE(
        std::equal(got[i].begin(), got[i].end(), data.begin() + i * kBlock))
        << "reader " << i << " got another block";
  }
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
      int fd = OpenDirect("f");
      void* buf = nullptr;
      if (fd < 0 || ::posix_memalign(&buf, kBlock, kBlock) != 0) {
        bad.fetch_add(1);
        return;
      }
      for (size_t i = 0; i < 4 * kBlocks; ++i) {
        size_t b = (i * 7 + static_cast<size_t>(t) * 13) % kBlocks;
        ssize_t n = ::pread(fd, buf, kBlock, static_cast<off_t>(b * kBlock));
        if (n != static_cast<ssize_t>(kBlock) ||
            std::memcmp(buf, data.data() + b * kBlock, kBlock) != 0)
          bad.fetch_add(1);
      }
      std::free(buf);
      ::close(fd);
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
  int fd = OpenDirect("f");
  ASSERT_GE(fd, 0);
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, kBlock, kBlock), 0);
  const int reads = 8 * m_->session().Stats().uring_depth + 8;
  int good = 0;
  for (int i = 0; i < reads; ++i) {
    size_t b = static_cast<size_t>(i) % 4;
    if (::pread(fd, buf, kBlock, static_cast<off_t>(b * kBlock)) ==
            static_cast<ssize_t>(kBlock) &&
        std::memcmp(buf, data.data() + b * kBlock, kBlock) == 0)
      ++good;
  }
  std::free(buf);
  ::close(fd);
  EXPECT_EQ(good, reads);
}

// A dropped Replier answers EIO; the next READ still works.
TEST_F(UringRead, DroppedReadAnswersEio) {
  Mount(ReadMode::kDropAtOffset0);
  if (IsSkipped()) return;
  const auto data = PutFile("f", 2);
  int fd = OpenDirect("f");
  ASSERT_GE(fd, 0);
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, kBlock, kBlock), 0);
  errno = 0;
  EXPECT_EQ(::pread(fd, buf, kBlock, 0), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(::pread(fd, buf, kBlock, kBlock), static_cast<ssize_t>(kBlock));
  EXPECT_EQ(std::memcmp(buf, data.data() + kBlock, kBlock), 0);
  std::free(buf);
  ::close(fd);
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
    int fd = OpenDirect("f");
    void* buf = nullptr;
    if (fd >= 0 && ::posix_memalign(&buf, kBlock, kBlock) == 0) {
      n = ::pread(fd, buf, kBlock, 0);
      err = errno;
      std::free(buf);
    }
    if (fd >= 0) ::close(fd);
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

// Unmount (lazily, as `umount -l` would) while READs are held in workers:
// once they are released the session ends, and no transport thread, ring
// or eventfd is left.
TEST_F(UringRead, UnmountWithReadsInFlightLeavesNothingBehind) {
  Mount(ReadMode::kGate);
  if (IsSkipped()) return;
  PutFile("f", kWorkers);
  std::vector<std::thread> readers;
  for (int i = 0; i < kWorkers; ++i) {
    readers.emplace_back([&, i] {
      int fd = OpenDirect("f");
      void* buf = nullptr;
      if (fd >= 0 && ::posix_memalign(&buf, kBlock, kBlock) == 0) {
        [[maybe_unused]] ssize_t n =
            ::pread(fd, buf, kBlock, static_cast<off_t>(i * kBlock));
        std::free(buf);
      }
      if (fd >= 0) ::close(fd);
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

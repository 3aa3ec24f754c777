// fsx-style randomized test: thousands of mixed operations on one file
// through the kernel (buffered and O_DIRECT writes and reads at random
// offsets and sizes, truncate up/down, mmap writes and reads, fallocate
// extend/punch hole, fsync, close/reopen), each checked against an
// in-memory model; finally a remount and a full comparison.
//
// Replay a failure with STRIPEFS_FSX_SEED=<seed printed> (and
// STRIPEFS_FSX_OPS=<n> to change the count). Small stripes (4+2 x 16 KiB
// = 64 KiB) make stripe boundaries frequent; a short idle flush and a small
// memory cap make background flushes race with the operations.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/fs/fs_mount.h"

namespace stripefs::fs::testing {
namespace {

constexpr uint64_t kMaxSize = 3u << 20;
constexpr size_t kPage = 4096;

class Fsx {
 public:
  Fsx(const std::string& path, uint64_t seed) : rng_(seed), path_(path) {}

  ::testing::AssertionResult Run(int ops) {
    Reopen();
    for (int i = 0; i < ops; ++i) {
      op_ = i;
      auto r = Step();
      if (!r) return r;
    }
    ::fsync(fd_);
    Close();
    return VerifyWhole("at the end");
  }
  const std::vector<uint8_t>& model() const { return model_; }

 private:
  uint64_t Rand(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  uint64_t RandLen() {
    // Mostly small, sometimes large (several stripes).
    switch (Rand(4)) {
      case 0:
        return 1 + Rand(512);
      case 1:
        return 1 + Rand(16384);
      case 2:
        return 1 + Rand(100000);
      default:
        return 1 + Rand(600000);
    }
  }
  void Log(const std::string& s) {
    log_.push_back("#" + std::to_string(op_) + " " + s);
    if (log_.size() > 25) log_.pop_front();
  }
  ::testing::AssertionResult Failure(const std::string& what) {
    std::string l;
    for (const auto& s : log_) l += "  " + s + "\n";
    return ::testing::AssertionFailure() << what << "\nlast operations:\n" << l;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    if (dfd_ >= 0) ::close(dfd_);
    fd_ = dfd_ = -1;
  }
  void Reopen() {
    Close();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT, 0644);
    dfd_ = ::open(path_.c_str(), O_RDWR | O_DIRECT);
  }

  ::testing::AssertionResult Check(uint64_t off,
                                   const std::vector<uint8_t>& got, ssize_t n,
                                   const char* how) {
    const uint64_t want_n =
        off >= model_.size()
            ? 0
            : std::min<uint64_t>(got.size(), model_.size() - off);
    if (n < 0)
      return Failure(std::string(how) +
                     " read failed: " + std::strerror(errno));
    if (static_cast<uint64_t>(n) != want_n) {
      return Failure(std::string(how) + " read at " + std::to_string(off) +
                     " returned " + std::to_string(n) + " bytes, model has " +
                     std::to_string(want_n));
    }
    for (uint64_t i = 0; i < want_n; ++i) {
      if (got[i] != model_[off + i]) {
        return Failure(std::string(how) + " read mismatch at byte " +
                       std::to_string(off + i) + ": got " +
                       std::to_string(got[i]) + ", model " +
                       std::to_string(model_[off + i]) + " (file size " +
                       std::to_string(model_.size()) + ")");
      }
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult VerifyWhole(const char* when) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0)
      return Failure(std::string("stat ") + when);
    if (static_cast<uint64_t>(st.st_size) != model_.size()) {
      return Failure(std::string(when) + ": size " +
                     std::to_string(st.st_size) + ", model " +
                     std::to_string(model_.size()));
    }
    int fd = ::open(path_.c_str(), O_RDONLY);
    std::vector<uint8_t> got(model_.size() + 10);
    ssize_t n = 0, total = 0;
    while ((n = ::pread(fd, got.data() + total, got.size() - total, total)) > 0)
      total += n;
    ::close(fd);
    got.resize(std::min<size_t>(got.size(), model_.size()));
    return Check(0, got, total, when);
  }

  ::testing::AssertionResult Step() {
    const uint64_t size = model_.size();
    switch (Rand(20)) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4: {  // buffered write
        uint64_t off = Rand(kMaxSize),
                 len = std::min(RandLen(), kMaxSize - off);
        if (len == 0) break;
        std::vector<uint8_t> d(len);
        for (auto& b : d) b = static_cast<uint8_t>(rng_());
        Log("write " + std::to_string(off) + " +" + std::to_string(len));
        if (::pwrite(fd_, d.data(), len, off) != static_cast<ssize_t>(len)) {
          return Failure(std::string("write: ") + std::strerror(errno));
        }
        Apply(off, d);
        break;
      }
      case 5:
      case 6: {  // O_DIRECT write (unaligned is fine on FUSE)
        uint64_t off = Rand(kMaxSize),
                 len = std::min(RandLen(), kMaxSize - off);
        if (len == 0) break;
        std::vector<uint8_t> d(len);
        for (auto& b : d) b = static_cast<uint8_t>(rng_());
        Log("dio-write " + std::to_string(off) + " +" + std::to_string(len));
        if (::pwrite(dfd_, d.data(), len, off) != static_cast<ssize_t>(len)) {
          return Failure(std::string("direct write: ") + std::strerror(errno));
        }
        Apply(off, d);
        break;
      }
      case 7:
      case 8:
      case 9: {  // buffered read
        uint64_t off = Rand(size + 1000), len = RandLen();
        std::vector<uint8_t> got(len);
        Log("read " + std::to_string(off) + " +" + std::to_string(len));
        ssize_t n = ::pread(fd_, got.data(), len, off);
        return Check(off, got, n, "buffered");
      }
      case 10: {  // O_DIRECT read: answered by the server (buffer overlay)
        uint64_t off = Rand(size + 1000), len = RandLen();
        std::vector<uint8_t> got(len);
        Log("dio-read " + std::to_string(off) + " +" + std::to_string(len));
        ssize_t n = ::pread(dfd_, got.data(), len, off);
        return Check(off, got, n, "direct");
      }
      case 11:
      case 12: {  // truncate up or down
        uint64_t ns = Rand(4) == 0 ? 0 : Rand(kMaxSize);
        Log("truncate " + std::to_string(ns));
        if (::ftruncate(fd_, ns) != 0)
          return Failure(std::string("ftruncate: ") + std::strerror(errno));
        model_.resize(ns, 0);
        break;
      }
      case 13:
      case 14: {  // mmap write or read inside the file
        if (size < kPage) break;
        uint64_t off = Rand(size) & ~(kPage - 1);
        uint64_t len = std::min<uint64_t>(1 + Rand(200000), size - off);
        const bool write = Rand(2) == 0;
        Log(std::string(write ? "mmap-write " : "mmap-read ") +
            std::to_string(off) + " +" + std::to_string(len));
        void* p =
            ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, off);
        if (p == MAP_FAILED)
          return Failure(std::string("mmap: ") + std::strerror(errno));
        auto* bytes = static_cast<uint8_t*>(p);
        if (write) {
          std::vector<uint8_t> d(len);
          for (auto& b : d) b = static_cast<uint8_t>(rng_());
          std::memcpy(bytes, d.data(), len);
          if (Rand(2) == 0) ::msync(p, len, MS_SYNC);
          Apply(off, d);
          ::munmap(p, len);
        } else {
          std::vector<uint8_t> got(bytes, bytes + len);
          ::munmap(p, len);
          return Check(off, got, static_cast<ssize_t>(len), "mmap");
        }
        break;
      }
      case 15: {  // fallocate: extend or punch a hole
        if (Rand(2) == 0) {
          uint64_t off = Rand(kMaxSize),
                   len = std::min<uint64_t>(RandLen(), kMaxSize - off);
          if (len == 0) break;
          Log("fallocate " + std::to_string(off) + " +" + std::to_string(len));
          if (::fallocate(fd_, 0, off, len) != 0)
            return Failure(std::string("fallocate: ") + std::strerror(errno));
          if (off + len > model_.size()) model_.resize(off + len, 0);
        } else {
          uint64_t off = Rand(size + 1), len = RandLen();
          Log("punch " + std::to_string(off) + " +" + std::to_string(len));
          if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
                          len) != 0) {
            return Failure(std::string("punch hole: ") + std::strerror(errno));
          }
          for (uint64_t i = off;
               i < std::min<uint64_t>(off + len, model_.size()); ++i)
            model_[i] = 0;
        }
        break;
      }
      case 16:
      case 17: {
        Log("fsync");
        if (::fsync(fd_) != 0)
          return Failure(std::string("fsync: ") + std::strerror(errno));
        break;
      }
      case 18: {
        Log("close/reopen");
        Reopen();
        if (fd_ < 0 || dfd_ < 0) return Failure("reopen failed");
        break;
      }
      default: {
        struct stat st {};
        Log("fstat");
        if (::fstat(fd_, &st) != 0) return Failure("fstat");
        if (static_cast<uint64_t>(st.st_size) != model_.size()) {
          return Failure("fstat size " + std::to_string(st.st_size) +
                         ", model " + std::to_string(model_.size()));
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

  void Apply(uint64_t off, const std::vector<uint8_t>& d) {
    if (off + d.size() > model_.size()) model_.resize(off + d.size(), 0);
    std::copy(d.begin(), d.end(), model_.begin() + off);
  }

  std::mt19937_64 rng_;
  std::string path_;
  std::vector<uint8_t> model_;
  int fd_ = -1, dfd_ = -1;
  int op_ = 0;
  std::deque<std::string> log_;
};

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::vector<uint8_t> out;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  uint8_t buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    out.insert(out.end(), buf, buf + n);
  ::close(fd);
  return out;
}

uint64_t Seed() {
  if (const char* s = std::getenv("STRIPEFS_FSX_SEED"))
    return std::strtoull(s, nullptr, 10);
  return std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
}
int Ops(int default_ops) {
  if (const char* s = std::getenv("STRIPEFS_FSX_OPS")) return std::atoi(s);
  return default_ops;
}

void RunFsx(bool coalesce, FsBackend backend = FsBackend::kEmbedded,
            int default_ops = 2000,
            fuse::TransportChoice transport = fuse::TransportChoice::kDev) {
  const std::string skip = BackendSkipMessage(backend, transport);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const uint64_t seed = Seed();
  const int ops = Ops(default_ops);
  std::printf(
      "fsx: seed %llu, %d operations, coalescing %s, %s backend, %s "
      "transport (replay: STRIPEFS_FSX_SEED=%llu)\n",
      static_cast<unsigned long long>(seed), ops, coalesce ? "on" : "off",
      FsBackendName(backend),
      std::string(fuse::TransportChoiceName(transport)).c_str(),
      static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  FsMountOptions o;
  o.backend = backend;
  o.transport = transport;
  o.geometry.k = 4;
  o.geometry.m = 2;
  o.geometry.cell_size = 16 * 1024;
  o.fs.coalesce = coalesce;
  o.fs.idle_flush = std::chrono::milliseconds(50);
  o.fs.memory_cap = 4 * 64 * 1024;
  auto m = FsMount::Start(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // The operations run in a child process: a FUSE server must not share its
  // address space with a client that munmaps its files (munmap waits for
  // writeback while holding the mmap lock the server's allocator needs).
  const std::string model_path = (*m)->volume_dir() + ".model";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Fsx fsx((*m)->Path("fsx"), seed);
    auto r = fsx.Run(ops);
    if (!r) {
      std::fprintf(stderr, "fsx FAILED (seed %llu): %s\n",
                   static_cast<unsigned long long>(seed), r.message());
      std::fflush(stderr);
      ::_exit(1);
    }
    FILE* f = std::fopen(model_path.c_str(), "wb");
    if (!f || std::fwrite(fsx.model().data(), 1, fsx.model().size(), f) !=
                  fsx.model().size()) {
      ::_exit(2);
    }
    std::fclose(f);
    ::_exit(0);
  }
  int status = 0;
  // Bounded: the child gets 10 minutes at most.
  for (int i = 0; i < 6000 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "fsx child did not finish (seed " << seed << ")";
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "fsx child failed, see its message above (seed " << seed << ")";
  std::vector<uint8_t> model;
  {
    FILE* f = std::fopen(model_path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
      model.insert(model.end(), buf, buf + n);
    std::fclose(f);
    std::remove(model_path.c_str());
  }
  auto s = (*m)->fs().StatsJson();
  std::printf(
      "fsx: WRITEs %llu, backend full-stripe %llu of %llu stripe writes, "
      "errors %s\n",
      (unsigned long long)s["writes"]["requests"].get<uint64_t>(),
      (unsigned long long)s["backend"]["full_stripe_writes"].get<uint64_t>(),
      (unsigned long long)s["backend"]["stripe_writes"].get<uint64_t>(),
      s["errors"].dump().c_str());
  EXPECT_TRUE(s["errors"].empty()) << s["errors"].dump();
  ASSERT_TRUE((*m)->Remount().ok());
  EXPECT_EQ(ReadFile((*m)->Path("fsx")), model)
      << "after remount, seed " << seed;
}

TEST(FsxTest, RandomOpsWithCoalescing) { RunFsx(true); }
TEST(FsxTest, RandomOpsWithoutCoalescing) { RunFsx(false); }
// The same on a local 6-server cluster (metad + 6 chunkd over loopback RPC):
// fewer operations, every one is a network round trip.
TEST(FsxTest, RandomOpsOnClusterWithCoalescing) {
  RunFsx(true, FsBackend::kCluster, 600);
}
// The same operations over FUSE-over-io-uring (READs on the read workers).
TEST(FsxTest, RandomOpsOverUringWithCoalescing) {
  RunFsx(true, FsBackend::kEmbedded, 2000, fuse::TransportChoice::kUring);
}

}  // namespace
}  // namespace stripefs::fs::testing

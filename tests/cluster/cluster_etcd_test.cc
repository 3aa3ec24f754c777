// Failures of an etcd-backed cluster (`stripefs cluster up --meta-engine
// etcd --etcd-members 3 --metads 2`, 6 chunkd, 4+2 with 64 KiB cells),
// seen through a FUSE mount in this process that knows both metads:
//   - kill -9 of the etcd leader during a write + fsync loop: writes go on
//     after the election, every fsync'd byte reads back, scrub finds no torn
//     stripe;
//   - kill -9 of the metad the mount talks to: it moves to the other one, a
//     running fio --verify sees no error;
//   - 2 of 3 etcd members down: an operation waits out the hold time and
//     then fails with EIO (no hang); with the members back, everything is
//     intact and operations work again;
//   - two mounts, each on its own metad, create/rename/link/unlink/mkdir/
//     rmdir in the same directories at once: no lost or duplicate entry,
//     link counts right.
// One cluster serves the whole suite (each test works in its own directory
// and restarts what it killed). Skips loudly without root, /dev/fuse, the
// stripefs binary or Debian's etcd.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/client/holding_meta_service.h"
#include "backend/client/volume.h"
#include "tests/fs/fs_mount.h"
#include "tests/support/file_bytes.h"
#include "tests/support/random_bytes.h"

namespace stripefs {
namespace {

using fs::testing::BackendSkipMessage;
using fs::testing::FsBackend;
using fs::testing::FsMount;
using fs::testing::FsMountOptions;
using stripefs::testing::RandomBytes;
using stripefs::testing::ReadFileBytes;
using Clock = std::chrono::steady_clock;

constexpr int kMetaHoldS = 15;  // the mount's --meta-hold-s

class EtcdClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = BackendSkipMessage(FsBackend::kClusterEtcd);
    if (!skip_.empty()) return;
    FsMountOptions o;
    o.backend = FsBackend::kClusterEtcd;
    o.geometry.cell_size = 65536;
    o.meta_hold_s = kMetaHoldS;
    o.etcd_members = 3;
    auto m = FsMount::Start(o);
    if (!m.ok()) {
      start_error_ = m.status().ToString();
      return;
    }
    m_ = std::move(m).value().release();
  }
  static void TearDownTestSuite() {
    delete m_;
    m_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_NE(m_, nullptr) << "cluster did not start: " << start_error_;
  }

  static std::string P(const std::string& rel) { return m_->Path(rel); }
  static stripefs::testing::LocalCluster& cluster() { return *m_->cluster(); }
  static uint64_t StripeSize() { return m_->volume().client().stripe_size(); }
  // Runs `stripefs scrub` on the whole volume (CRCs and parity of every
  // stripe): 0 when nothing is torn or damaged.
  static int Scrub() {
    return cluster().Cli("scrub --meta " + cluster().meta_address() +
                         " --key " + cluster().key_file());
  }

  static FsMount* m_;
  static std::string skip_, start_error_;
};

FsMount* EtcdClusterTest::m_ = nullptr;
std::string EtcdClusterTest::skip_;
std::string EtcdClusterTest::start_error_;

// Appends `data` at `offset` and fsyncs; "" or what failed.
std::string WriteAndSync(const std::string& path, uint64_t offset,
                         const std::vector<uint8_t>& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return "open " + path + ": " + std::strerror(errno);
  std::string err;
  if (::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)) !=
      static_cast<ssize_t>(data.size()))
    err = "pwrite " + path + ": " + std::strerror(errno);
  else if (::fsync(fd) != 0)
    err = "fsync " + path + ": " + std::strerror(errno);
  if (::close(fd) != 0 && err.empty())
    err = "close " + path + ": " + std::strerror(errno);
  return err;
}

// The names in directory `path` (without . and ..), as a multiset so a
// duplicate shows.
std::multiset<std::string> ListDir(const std::string& path) {
  std::multiset<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.insert(n);
  }
  ::closedir(d);
  return out;
}

TEST_F(EtcdClusterTest, LeaderKilledDuringFsyncLoopLosesNoAcknowledgedByte) {
  ASSERT_EQ(::mkdir(P("leader").c_str(), 0755), 0) << std::strerror(errno);
  constexpr int kFiles = 4;
  const uint64_t chunk = StripeSize() + StripeSize() / 3;  // unaligned
  std::vector<std::vector<uint8_t>> acked(kFiles);
  std::atomic<int> synced{0};
  std::atomic<bool> stop{false};
  std::string error;
  std::thread writer([&] {
    for (int i = 0; i < 2000 && !stop.load(); ++i) {  // bounded
      const int f = i % kFiles;
      auto data = RandomBytes(chunk, static_cast<uint32_t>(i + 1));
      error = WriteAndSync(P("leader/f" + std::to_string(f)), acked[f].size(),
                           data);
      if (!error.empty()) return;
      acked[f].insert(acked[f].end(), data.begin(), data.end());
      synced.fetch_add(1);
    }
  });
  auto wait_for = [&](int n, int seconds) {
    const auto until = Clock::now() + std::chrono::seconds(seconds);
    while (synced.load() < n && Clock::now() < until && !stop.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return synced.load() >= n;
  };
  bool before = wait_for(8, 120);
  auto leader = cluster().EtcdLeader();
  Status killed =
      leader.ok() ? cluster().Signal("etcd." + std::to_string(*leader), SIGKILL)
                  : leader.status();
  const int at_kill = synced.load();
  const auto t_kill = Clock::now();
  // Writes go on after the election (held while there is no leader).
  bool after = killed.ok() && wait_for(at_kill + 12, 240);
  const auto resumed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - t_kill);
  stop = true;
  writer.join();
  ASSERT_TRUE(before) << "writer did not get going: " << error;
  ASSERT_TRUE(killed.ok()) << killed.ToString();
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_TRUE(after) << "only " << synced.load() - at_kill
                     << " fsyncs after the leader died: " << error;
  auto now_leader = cluster().EtcdLeader();
  ASSERT_TRUE(now_leader.ok()) << now_leader.status().ToString();
  EXPECT_NE(*now_leader, *leader);
  std::printf(
      "etcd.%d (leader) killed after %d fsyncs; etcd.%d leads; 12 "
      "more fsyncs within %lld ms; %d fsyncs in all\n",
      *leader, at_kill, *now_leader, static_cast<long long>(resumed_ms.count()),
      synced.load());
  ASSERT_TRUE(cluster().StartServer("etcd." + std::to_string(*leader)).ok())
      << cluster().Log();
  // Every fsync'd byte, read back from the chunk servers (a fresh mount:
  // nothing from the page cache).
  ASSERT_TRUE(m_->Remount().ok());
  for (int f = 0; f < kFiles; ++f) {
    auto back = ReadFileBytes(P("leader/f" + std::to_string(f)));
    EXPECT_EQ(back.size(), acked[f].size()) << "f" << f;
    EXPECT_TRUE(back == acked[f]) << "f" << f << " differs";
  }
  EXPECT_EQ(Scrub(), 0) << cluster().Log();
}

TEST_F(EtcdClusterTest, MetadKilledUnderFioVerifyIsNoApplicationError) {
  if (cluster().Sh("command -v fio") != 0)
    GTEST_SKIP() << "SKIPPED: fio not installed";
  ASSERT_EQ(::mkdir(P("fio").c_str(), 0755), 0) << std::strerror(errno);
  const std::string out = cluster().dir() + "/fio-metad.out";
  std::atomic<int> fio_rc{-1};
  std::thread fio([&] {
    fio_rc = cluster().Sh(
        "timeout 600 fio --name=failover --directory=" + P("fio") +
        " --rw=write --bs=256k --size=32M --numjobs=2 --fsync=16"
        " --end_fsync=1 --verify=crc32c --do_verify=1 --verify_fatal=1"
        " --verify_state_save=0"
        " --output=" +
        out);
  });
  for (int i = 0; i < 20000; ++i) {  // <= 20 s: fio has written something
    struct stat st {};
    if (::stat(P("fio/failover.0.0").c_str(), &st) == 0 &&
        st.st_size >= (4 << 20))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The mount was given metad.1 first: that is the one it talks to (the
  // failover count below shows it moved).
  const uint64_t failovers_before = m_->volume().meta_failovers();
  Status killed = cluster().Signal(cluster().metad_name(1), SIGKILL);
  const bool running = fio_rc.load() == -1;
  // While metad.1 is down, namespace operations go to metad.2.
  const int mk = ::mkdir(P("fio/while-metad1-down").c_str(), 0755);
  const int mk_errno = errno;
  fio.join();
  ASSERT_TRUE(killed.ok()) << killed.ToString();
  EXPECT_TRUE(running) << "fio ended before metad.1 was killed";
  EXPECT_EQ(mk, 0) << std::strerror(mk_errno);
  std::ifstream f(out);
  std::string report((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(fio_rc.load(), 0) << report << cluster().Log();
  EXPECT_FALSE(report.empty()) << "fio wrote no report";
  EXPECT_EQ(report.find("err="), report.find("err= 0")) << report;
  EXPECT_GT(m_->volume().meta_failovers(), failovers_before)
      << "no connection moved to metad.2: the kill tested nothing";
  ASSERT_TRUE(cluster().StartServer(cluster().metad_name(1)).ok())
      << cluster().Log();
}

TEST_F(EtcdClusterTest, QuorumLossWaitsThenFailsCleanlyAndRecovers) {
  ASSERT_EQ(::mkdir(P("quorum").c_str(), 0755), 0) << std::strerror(errno);
  const auto data = RandomBytes(3 * StripeSize() + 12345, 77);
  ASSERT_EQ(WriteAndSync(P("quorum/before"), 0, data), "");
  ASSERT_TRUE(cluster().Signal("etcd.1", SIGKILL).ok()) << cluster().Log();
  ASSERT_TRUE(cluster().Signal("etcd.2", SIGKILL).ok()) << cluster().Log();
  // A namespace change needs a quorum: it waits (metad's etcd timeout, then
  // the mount's hold time) and fails with EIO; it never hangs. The holder's
  // counters show it waited and then gave up (not an EIO at once).
  const HoldingMetaService* h = m_->volume().holding_meta();
  ASSERT_NE(h, nullptr) << "the mount has no metad hold";
  const uint64_t held_before = h->held_calls();
  const uint64_t expired_before = h->expired_calls();
  const auto t0 = Clock::now();
  const int rc = ::mkdir(P("quorum/during").c_str(), 0755);
  const int err = errno;
  const auto waited =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t0);
  Status back1 = cluster().StartServer("etcd.1");
  Status back2 = cluster().StartServer("etcd.2");
  EXPECT_EQ(rc, -1);
  EXPECT_EQ(err, EIO) << std::strerror(err);
  std::printf("quorum lost: mkdir failed (%s) after %lld s (hold %d s)\n",
              std::strerror(err), static_cast<long long>(waited.count()),
              kMetaHoldS);
  EXPECT_GT(h->held_calls(), held_before) << "the mkdir was not held";
  EXPECT_GT(h->expired_calls(), expired_before)
      << "the EIO did not come from a hold that ran out";
  ASSERT_TRUE(back1.ok()) << back1.ToString();
  ASSERT_TRUE(back2.ok()) << back2.ToString();
  // With the members back: operations work, nothing was lost or corrupted.
  EXPECT_EQ(::mkdir(P("quorum/after").c_str(), 0755), 0)
      << std::strerror(errno);
  ASSERT_TRUE(m_->Remount().ok());
  EXPECT_TRUE(ReadFileBytes(P("quorum/before")) == data);
  auto names = ListDir(P("quorum"));
  EXPECT_EQ(names.count("before"), 1u);
  EXPECT_EQ(names.count("after"), 1u);
  EXPECT_EQ(names.count("during"), 0u) << "a failed mkdir took effect";
  EXPECT_EQ(Scrub(), 0) << cluster().Log();
}

// What one client does in the shared directories d0..d3, and what it
// expects to remain.
struct NamespaceWork {
  std::string root;  // the client's mountpoint
  int client = 0;
  int iterations = 40;
  std::vector<std::string> errors;
  // dir index -> name -> nlink expected (files), or -1 for a directory.
  std::map<int, std::map<std::string, int>> expect;

  size_t entries() const {
    size_t n = 0;
    for (const auto& dir : expect) n += dir.second.size();
    return n;
  }

  void Run() {
    auto path = [&](int d, const std::string& n) {
      return root + "/ns/d" + std::to_string(d) + "/" + n;
    };
    auto check = [&](bool ok, const std::string& what) {
      if (!ok) errors.push_back(what + ": " + std::strerror(errno));
      return ok;
    };
    const std::string c = std::to_string(client);
    for (int i = 0; i < iterations; ++i) {
      const int d = i % 4, d2 = (i + 1) % 4;
      const std::string id = c + "_" + std::to_string(i);
      std::string f = "f" + id;
      int fd = ::open(path(d, f).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
      if (!check(fd >= 0, "create " + path(d, f))) continue;
      check(
          ::write(fd, id.data(), id.size()) == static_cast<ssize_t>(id.size()),
          "write " + path(d, f));
      ::close(fd);
      int fd_dir = d;
      if (i % 3 == 0 &&
          check(::rename(path(d, f).c_str(), path(d2, "r" + id).c_str()) == 0,
                "rename " + path(d, f))) {
        fd_dir = d2;
        f = "r" + id;
      }
      int links = 1;
      if (i % 5 == 0 &&
          check(::link(path(fd_dir, f).c_str(), path(d, "h" + id).c_str()) == 0,
                "link " + path(fd_dir, f))) {
        links = 2;
        expect[d]["h" + id] = 2;
      }
      if (i % 4 == 1 && check(::unlink(path(fd_dir, f).c_str()) == 0,
                              "unlink " + path(fd_dir, f))) {
        --links;
        if (links == 1) expect[d]["h" + id] = 1;
      } else {
        expect[fd_dir][f] = links;
      }
      const std::string s = "s" + id;
      if (check(::mkdir(path(d2, s).c_str(), 0755) == 0, "mkdir " + s)) {
        if (i % 2 == 0 && check(::rmdir(path(d2, s).c_str()) == 0, "rmdir"))
          continue;
        expect[d2][s] = -1;
      }
    }
  }
};

TEST_F(EtcdClusterTest, TwoMountsOnTwoMetadsKeepTheNamespaceConsistent) {
  ASSERT_EQ(::mkdir(P("ns").c_str(), 0755), 0) << std::strerror(errno);
  for (int d = 0; d < 4; ++d)
    ASSERT_EQ(::mkdir(P("ns/d" + std::to_string(d)).c_str(), 0755), 0);
  fs::StripeFsOptions fo;
  auto a = m_->MountAgain("a", fo, false, cluster().metad_address(1));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = m_->MountAgain("b", fo, false, cluster().metad_address(2));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  NamespaceWork wa, wb;
  const std::string parent =
      std::filesystem::path(m_->mnt()).parent_path().string();
  wa.root = parent + "/a";  // MountAgain's mountpoints
  wb.root = parent + "/b";
  wa.client = 0;
  wb.client = 1;
  std::thread ta([&] { wa.Run(); });
  std::thread tb([&] { wb.Run(); });
  ta.join();
  tb.join();
  std::printf("two mounts: %zu + %zu entries expected in ns/d0..d3\n",
              wa.entries(), wb.entries());
  for (const auto* w : {&wa, &wb}) {
    EXPECT_TRUE(w->errors.empty())
        << "client " << w->client << ": " << w->errors.size()
        << " errors, first: " << w->errors.front();
  }
  a->reset();  // unmount both
  b->reset();

  // Checked through the metadata service itself (no kernel cache), on each
  // metad in turn: the same namespace.
  for (int metad = 1; metad <= 2; ++metad) {
    auto v = Volume::ConnectCluster(cluster().metad_address(metad),
                                    cluster().key_file());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    MetaService& meta = (*v)->meta();
    auto ns = meta.Lookup(kRootInode, "ns");
    ASSERT_TRUE(ns.ok()) << ns.status().ToString();
    for (int d = 0; d < 4; ++d) {
      std::map<std::string, int> expect = wa.expect[d];
      for (const auto& [n, l] : wb.expect[d]) expect[n] = l;
      auto dir = meta.Lookup(ns->ino, "d" + std::to_string(d));
      ASSERT_TRUE(dir.ok()) << dir.status().ToString();
      auto entries = meta.ReadDir(dir->ino, 0, 100000);
      ASSERT_TRUE(entries.ok()) << entries.status().ToString();
      std::multiset<std::string> seen;
      int subdirs = 0;
      for (const DirEntry& e : *entries) {
        if (e.name == "." || e.name == "..") continue;
        seen.insert(e.name);
        auto attr = meta.GetAttr(e.ino);
        ASSERT_TRUE(attr.ok()) << e.name << ": " << attr.status().ToString();
        auto want = expect.find(e.name);
        if (want == expect.end()) continue;  // reported below
        if (want->second < 0) {
          ++subdirs;
          EXPECT_TRUE(S_ISDIR(attr->mode)) << e.name;
          EXPECT_EQ(attr->nlink, 2u) << e.name;
        } else {
          EXPECT_EQ(attr->nlink, static_cast<uint32_t>(want->second))
              << "d" << d << "/" << e.name << " via metad." << metad;
        }
      }
      std::multiset<std::string> want_names;
      for (const auto& [n, l] : expect) want_names.insert(n);
      EXPECT_EQ(seen, want_names) << "d" << d << " via metad." << metad;
      EXPECT_EQ(dir->nlink, 2u + subdirs) << "d" << d;
    }
  }
  EXPECT_EQ(ListDir(P("ns/d0")).size(),
            wa.expect[0].size() + wb.expect[0].size());
}

}  // namespace
}  // namespace stripefs

// Helpers shared by the MetaStore tests: a temporary directory removed at
// scope exit, the fixture bases that put a test on a RocksDB directory or a
// key prefix of the process's shared etcd (skipping loudly without etcd),
// and a whole-volume invariant checker that only uses the MetaService
// interface (so it also works for other implementations).
// Not thread-safe; use from the test's main thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/meta/meta_service.h"
#include "common/status.h"
#include "tests/support/etcd_process.h"

namespace stripefs::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/stripefs-meta-test-XXXXXX";
    char* p = mkdtemp(tmpl.data());
    if (p == nullptr) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Which key-value engine a test runs on.
enum class Engine { kRocksDb, kEtcd };

// The MetaStore location of a test on `engine`: on RocksDB the directory
// `tmp`/meta, on etcd a fresh key prefix `name`-PID-N on the process's shared
// etcd (SharedEtcdLocation), or why there is no etcd (skip with it).
inline Result<std::string> NewMetaLocation(Engine engine, const TempDir& tmp,
                                           const std::string& name) {
  if (engine == Engine::kEtcd) return SharedEtcdLocation(name);
  return tmp.sub("meta");
}

// Base of the MetaStore fixtures: SetUp sets location_ for `engine` (see
// NewMetaLocation; `etcd_name` names the etcd prefix). It skips the test,
// with the reason, only when the etcd binaries are not installed, and fails
// it when etcd does not start or the etcd engine is not built. A derived
// SetUp calls this one first and returns when IsSkipped() or
// HasFatalFailure().
class MetaLocationFixture : public ::testing::Test {
 protected:
  MetaLocationFixture(Engine engine, std::string etcd_name)
      : engine_(engine), etcd_name_(std::move(etcd_name)) {}
  void SetUp() override {
    // Skip only when the etcd binaries are not installed (a machine fact the
    // report checks); an etcd that does not start, or an engine not built,
    // fails every etcd case.
    if (engine_ == Engine::kEtcd) {
      if (std::string why = EtcdBinariesMissing(); !why.empty())
        GTEST_SKIP() << "etcd engine tests skipped: " << why;
    }
    auto loc = NewMetaLocation(engine_, tmp_, etcd_name_);
    ASSERT_TRUE(loc.ok()) << "no etcd for the etcd engine tests: "
                          << loc.status().ToString();
    location_ = *loc;
  }
  bool etcd() const { return engine_ == Engine::kEtcd; }

  const Engine engine_;
  const std::string etcd_name_;
  TempDir tmp_;
  std::string location_;
};

// MetaLocationFixture on the engine of the test parameter: instantiate the
// suite with Values(Engine::kRocksDb) and Values(Engine::kEtcd).
class MetaEngineFixture : public MetaLocationFixture,
                          public ::testing::WithParamInterface<Engine> {
 protected:
  explicit MetaEngineFixture(std::string etcd_name)
      : MetaLocationFixture(GetParam(), std::move(etcd_name)) {}
};

// Reads a whole directory through ReadDir in pages of `page` entries.
inline std::vector<DirEntry> ReadAll(MetaService& s, uint64_t dir,
                                     uint32_t page = 7) {
  std::vector<DirEntry> out;
  uint64_t cookie = 0;
  for (int guard = 0; guard < 1000000; ++guard) {
    auto r = s.ReadDir(dir, cookie, page);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || r->empty()) break;
    for (auto& e : *r) {
      EXPECT_GT(e.cookie, cookie) << "cookies must increase";
      cookie = e.cookie;
      out.push_back(e);
    }
  }
  return out;
}

// What CheckInvariants saw.
struct VolumeCensus {
  size_t dirs = 0;
  size_t files = 0;  // non-directories reachable from the root
  size_t orphans = 0;
  size_t stripes = 0;
  uint64_t max_version = 0;
};

// Walks the whole namespace and checks: every entry points to an existing
// inode of the entry's type; '.'/'..' are right; every directory is reached
// once (a tree); nlink of directories = 2 + subdirectories, of other inodes =
// number of entries naming them; orphans have nlink 0 and are unreachable;
// StatFs matches the census; every stripe belongs to an existing regular
// file and no version number appears twice or at/after the next allocated
// version (allocates one version to find out).
inline VolumeCensus CheckInvariants(MetaService& s) {
  VolumeCensus c;
  std::map<uint64_t, InodeAttr> attrs;       // every reachable inode
  std::map<uint64_t, uint32_t> entry_count;  // non-dirs: entries naming it
  std::map<uint64_t, uint32_t> subdirs;      // dirs: subdirectory count
  std::set<uint64_t> visited_dirs;
  std::vector<std::pair<uint64_t, uint64_t>> todo{{kRootInode, kRootInode}};
  while (!todo.empty()) {
    auto [dir, parent] = todo.back();
    todo.pop_back();
    if (!visited_dirs.insert(dir).second) {
      ADD_FAILURE() << "directory " << dir << " reached twice";
      continue;
    }
    auto dattr = s.GetAttr(dir);
    if (!dattr.ok()) {
      ADD_FAILURE() << "directory " << dir << ": " << dattr.status().ToString();
      continue;
    }
    attrs[dir] = *dattr;
    subdirs[dir];
    std::set<std::string> names;
    for (const DirEntry& e : ReadAll(s, dir)) {
      EXPECT_TRUE(names.insert(e.name).second) << "duplicate name " << e.name;
      if (e.name == ".") {
        EXPECT_EQ(e.ino, dir);
        continue;
      }
      if (e.name == "..") {
        EXPECT_EQ(e.ino, parent) << "'..' of " << dir;
        continue;
      }
      auto a = s.GetAttr(e.ino);
      if (!a.ok()) {
        ADD_FAILURE() << "entry '" << e.name << "' in " << dir
                      << " points to missing inode " << e.ino;
        continue;
      }
      EXPECT_EQ(a->mode & S_IFMT, e.mode & S_IFMT) << e.name;
      auto l = s.Lookup(dir, e.name);
      EXPECT_TRUE(l.ok() && l->ino == e.ino) << "lookup of " << e.name;
      attrs[e.ino] = *a;
      if (S_ISDIR(a->mode)) {
        subdirs[dir]++;
        todo.push_back({e.ino, dir});
      } else {
        entry_count[e.ino]++;
      }
    }
  }
  uint64_t bytes = 0;
  for (const auto& [ino, a] : attrs) {
    if (S_ISDIR(a.mode)) {
      EXPECT_EQ(a.nlink, 2 + subdirs[ino]) << "nlink of directory " << ino;
      c.dirs++;
    } else {
      EXPECT_EQ(a.nlink, entry_count[ino]) << "nlink of inode " << ino;
      c.files++;
    }
    if (S_ISREG(a.mode)) bytes += a.size;
  }
  auto orphans = s.ListOrphans();
  EXPECT_TRUE(orphans.ok());
  std::set<uint64_t> orphan_set;
  if (orphans.ok()) {
    for (uint64_t ino : *orphans) {
      EXPECT_EQ(attrs.count(ino), 0u) << "orphan " << ino << " is reachable";
      auto a = s.GetAttr(ino);
      EXPECT_TRUE(a.ok()) << "orphan " << ino << " has no inode";
      if (!a.ok()) continue;
      EXPECT_EQ(a->nlink, 0u);
      if (S_ISREG(a->mode)) bytes += a->size;
      orphan_set.insert(ino);
    }
  }
  c.orphans = orphan_set.size();
  auto st = s.StatFs();
  EXPECT_TRUE(st.ok());
  if (st.ok()) {
    EXPECT_EQ(st->inodes, attrs.size() + orphan_set.size()) << "StatFs inodes";
    EXPECT_EQ(st->bytes_used, bytes) << "StatFs bytes";
  }
  std::set<uint64_t> versions;
  uint64_t ai = 0, as = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    auto page = s.ListStripes(ai, as, 64);
    EXPECT_TRUE(page.ok());
    if (!page.ok() || page->empty()) break;
    for (const StripeRef& r : *page) {
      EXPECT_TRUE(r.inode > ai || (r.inode == ai && r.sv.stripe > as));
      ai = r.inode;
      as = r.sv.stripe;
      c.stripes++;
      EXPECT_TRUE(versions.insert(r.sv.version).second)
          << "version " << r.sv.version << " committed twice";
      c.max_version = std::max(c.max_version, r.sv.version);
      bool known = attrs.count(r.inode) || orphan_set.count(r.inode);
      EXPECT_TRUE(known) << "stripe of unknown inode " << r.inode;
      if (known) {
        auto a = s.GetAttr(r.inode);
        EXPECT_TRUE(a.ok() && S_ISREG(a->mode));
      }
    }
  }
  auto next = s.AllocateVersions(1);
  EXPECT_TRUE(next.ok());
  if (next.ok()) {
    EXPECT_GT(*next, c.max_version) << "version reuse possible";
  }
  return c;
}

}  // namespace stripefs::testing

// Concurrency of MetaStore: several threads create, rename, link and remove
// in shared directories while a reader pages through them; stripe commits
// race on the same stripes. Afterwards the volume invariants must hold and
// every compare-and-swap must have had exactly one winner.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "backend/meta/meta_store.h"
#include "tests/meta/meta_test_util.h"

namespace stripefs {
namespace {

using testing::CheckInvariants;
using testing::TempDir;

bool ExpectedNamespaceError(int code) {
  return code == 0 || code == ENOENT || code == EEXIST || code == ENOTEMPTY ||
         code == EISDIR || code == ENOTDIR || code == EINVAL || code == EPERM;
}

TEST(MetaStoreConcurrency, NamespaceThreadsInSharedDirs) {
  TempDir tmp;
  auto opened = MetaStore::Create(tmp.sub("meta"), Geometry{});
  ASSERT_TRUE(opened.ok());
  MetaStore& s = **opened;
  const uint64_t a = s.Mkdir(kRootInode, "a", 0755, 0, 0)->ino;
  const uint64_t b = s.Mkdir(kRootInode, "b", 0755, 0, 0)->ino;
  const uint64_t dirs[] = {a, b};
  constexpr int kThreads = 4;
  constexpr int kOps = 120;
  std::atomic<int> unexpected{0};
  std::atomic<int> succeeded{0};
  std::atomic<bool> done{false};
  std::mutex err_mu;
  std::string first_error;
  auto note = [&](const Status& st, const char* what) {
    if (st.ok()) succeeded++;
    if (!ExpectedNamespaceError(st.code())) {
      unexpected++;
      std::lock_guard<std::mutex> l(err_mu);
      if (first_error.empty())
        first_error = std::string(what) + ": " + st.ToString();
    }
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
      auto name = [&] { return "p" + std::to_string(pick(16)); };
      for (int i = 0; i < kOps; ++i) {
        uint64_t d = dirs[pick(2)];
        switch (pick(8)) {
          case 0:
          case 1:
            note(s.MkNode(d, name(), S_IFREG | 0644, 0, 0, 0).status(),
                 "mknod");
            break;
          case 2:
            note(s.Mkdir(d, name(), 0755, 0, 0).status(), "mkdir");
            break;
          case 3:
            note(s.Unlink(d, name()).status(), "unlink");
            break;
          case 4:
            note(s.Rmdir(d, name()), "rmdir");
            break;
          case 5:
          case 6: {
            uint64_t replaced = 0;
            note(s.Rename(d, name(), dirs[pick(2)], name(),
                          static_cast<uint32_t>(pick(3)), &replaced),
                 "rename");
            break;
          }
          case 7: {
            auto at = s.Lookup(d, name());
            if (at.ok()) {
              note(s.Link(at->ino, dirs[pick(2)], name()).status(), "link");
            }
            break;
          }
        }
      }
    });
  }
  // Reader: cookies within one pass strictly increase and never repeat.
  std::atomic<int> passes{0};
  std::thread reader([&] {
    while (!done.load()) {
      for (uint64_t d : dirs) {
        uint64_t cookie = 0;
        std::set<uint64_t> cookies;
        for (int guard = 0; guard < 10000; ++guard) {
          auto page = s.ReadDir(d, cookie, 5);
          if (!page.ok()) {
            unexpected++;
            break;
          }
          if (page->empty()) break;
          for (auto& e : *page) {
            if (e.cookie <= cookie || !cookies.insert(e.cookie).second) {
              unexpected++;
            }
            cookie = e.cookie;
          }
        }
      }
      passes++;
    }
  });
  for (auto& th : threads) th.join();
  done = true;
  reader.join();
  EXPECT_EQ(unexpected.load(), 0) << first_error;
  EXPECT_GT(succeeded.load(), kThreads * kOps / 4);
  EXPECT_GT(passes.load(), 0);
  CheckInvariants(s);
}

TEST(MetaStoreConcurrency, CommitStripeCasHasOneWinnerPerVersion) {
  TempDir tmp;
  auto opened = MetaStore::Create(tmp.sub("meta"), Geometry{});
  ASSERT_TRUE(opened.ok());
  MetaStore& s = **opened;
  const uint64_t f = s.MkNode(kRootInode, "f", S_IFREG | 0644, 0, 0, 0)->ino;
  const uint64_t S = Geometry{}.stripe_size();
  constexpr int kThreads = 4;
  constexpr int kCommitsPerThread = 25;
  std::mutex mu;
  // stripe -> (replaced version -> new version)
  std::map<uint64_t, std::map<uint64_t, uint64_t>> chain;
  std::atomic<int> stale{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommitsPerThread; ++i) {
        uint64_t stripe = (t + i) % 2;
        for (int attempt = 0; attempt < 1000; ++attempt) {
          auto cur = s.GetStripes(f, stripe, 1);
          auto v = s.AllocateVersions(1);
          if (!cur.ok() || !v.ok()) {
            failures++;
            return;
          }
          uint64_t expected = cur->empty() ? 0 : (*cur)[0].version;
          ObsoleteStripe ob;
          Status st = s.CommitStripe(f, {stripe, *v, 0, 4096}, expected,
                                     stripe * S + 100 * (t + 1), &ob);
          if (st.code() == ESTALE) {
            stale++;
            continue;
          }
          if (!st.ok() || ob.version != expected) {
            failures++;
            return;
          }
          std::lock_guard<std::mutex> l(mu);
          // A version can be replaced only once.
          if (!chain[stripe].emplace(expected, *v).second) failures++;
          break;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // Following the chain from 0 visits every successful commit and ends at
  // the committed version.
  size_t total = 0;
  for (uint64_t stripe : {0u, 1u}) {
    auto& c = chain[stripe];
    uint64_t v = 0;
    size_t steps = 0;
    while (c.count(v)) {
      v = c[v];
      steps++;
    }
    EXPECT_EQ(steps, c.size()) << "stripe " << stripe;
    auto cur = s.GetStripes(f, stripe, 1);
    ASSERT_TRUE(cur.ok());
    ASSERT_EQ(cur->size(), 1u);
    EXPECT_EQ((*cur)[0].version, v);
    total += c.size();
  }
  EXPECT_EQ(total, static_cast<size_t>(kThreads * kCommitsPerThread));
  EXPECT_EQ(s.GetAttr(f)->size, S + 400);
  std::printf("CAS races: %d stale retries over %zu commits\n", stale.load(),
              total);
  CheckInvariants(s);
}

TEST(MetaStoreConcurrency, AllocateVersionsRangesAreDisjoint) {
  TempDir tmp;
  MetaStoreOptions o;
  o.version_batch = 16;  // force many durable counter writes
  auto opened = MetaStore::Create(tmp.sub("meta"), Geometry{}, o);
  ASSERT_TRUE(opened.ok());
  MetaStore& s = **opened;
  std::mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        uint32_t n = 1 + (t * 7 + i) % 13;
        auto first = s.AllocateVersions(n);
        ASSERT_TRUE(first.ok());
        std::lock_guard<std::mutex> l(mu);
        ranges.push_back({*first, *first + n});
      }
    });
  }
  for (auto& th : threads) th.join();
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  }
  EXPECT_GE(ranges.front().first, 1u);
}

}  // namespace
}  // namespace stripefs

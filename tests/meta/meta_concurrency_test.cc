// Concurrency of MetaStore: several threads create, rename, link and remove
// in shared directories while a reader pages through them; stripe commits
// race on the same stripes. Afterwards the volume invariants must hold and
// every compare-and-swap must have had exactly one winner.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
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

// Group commit: mutations that arrive while a WAL sync is under way are all
// made durable by the next one sync. The hook holds the first sync until
// every follower has applied its change, so the sharing is forced, not
// left to timing.
TEST(MetaStoreGroupCommit, ConcurrentMutationsShareOneWalSync) {
  TempDir tmp;
  constexpr int kFollowers = 6;
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false, leader_waiting = false;
  MetaStore* store = nullptr;
  uint64_t target = 0;  // mutations that must be applied before the sync
  MetaStoreOptions o;
  o.before_wal_sync = [&] {
    std::unique_lock<std::mutex> l(mu);
    if (!armed) return;
    armed = false;  // only the first sync waits
    leader_waiting = true;
    cv.notify_all();
    // The followers apply their changes without a sync, then wait for one
    // (so they cannot signal): poll, bounded by a generous deadline.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (store->commit_stats().mutations < target &&
           std::chrono::steady_clock::now() < give_up) {
      cv.wait_for(l, std::chrono::milliseconds(5));
    }
  };
  auto opened = MetaStore::Create(tmp.sub("meta"), Geometry{4, 2, 4096}, o);
  ASSERT_TRUE(opened.ok());
  MetaStore& s = **opened;
  store = &s;
  const uint64_t d = s.Mkdir(kRootInode, "d", 0755, 0, 0)->ino;
  const uint64_t f = s.MkNode(kRootInode, "f", S_IFREG | 0644, 0, 0, 0)->ino;
  const uint64_t g = s.MkNode(kRootInode, "g", S_IFREG | 0644, 0, 0, 0)->ino;
  const uint64_t v = *s.AllocateVersions(8);

  const MetaCommitStats before = s.commit_stats();
  {
    std::lock_guard<std::mutex> l(mu);
    armed = true;
    target = before.mutations + 1 + kFollowers;
  }
  Status leader_st;
  std::thread leader([&] {
    leader_st = s.MkNode(d, "leader", S_IFREG | 0644, 0, 0, 0).status();
  });
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(120),
                            [&] { return leader_waiting; }));
  }
  // One of each kind of mutation: namespace ops and stripe commits.
  std::vector<std::function<Status()>> ops = {
      [&] { return s.Mkdir(d, "sub", 0755, 0, 0).status(); },
      [&] { return s.MkNode(d, "x", S_IFREG | 0644, 0, 0, 0).status(); },
      [&] {
        std::vector<ObsoleteStripe> ob;
        return s.CommitStripes(f,
                               {{{0, v, 0, 4096}, 0}, {{1, v + 1, 0, 4096}, 0}},
                               2 * 16384, &ob);
      },
      [&] {
        ObsoleteStripe ob;
        return s.CommitStripe(g, {0, v + 2, 0, 4096}, 0, 100, &ob);
      },
      [&] {
        SetAttrRequest r;
        r.mask = kSetMode;
        r.mode = 0600;
        std::vector<ObsoleteStripe> ob;
        return s.SetAttr(f, r, &ob).status();
      },
      [&] {
        uint64_t replaced = 0;
        return s.Rename(kRootInode, "g", d, "g2", 0, &replaced);
      },
  };
  ASSERT_EQ(ops.size(), static_cast<size_t>(kFollowers));
  std::vector<Status> results(ops.size());
  std::vector<std::thread> followers;
  for (size_t i = 0; i < ops.size(); ++i)
    followers.emplace_back([&, i] { results[i] = ops[i](); });
  for (auto& t : followers) t.join();
  leader.join();
  ASSERT_TRUE(leader_st.ok()) << leader_st.ToString();
  for (const auto& st : results) EXPECT_TRUE(st.ok()) << st.ToString();
  const MetaCommitStats after = s.commit_stats();
  EXPECT_EQ(after.mutations - before.mutations, 1u + kFollowers);
  EXPECT_EQ(after.wal_syncs - before.wal_syncs, 1u);  // one sync for all
  CheckInvariants(s);
}

// The same per-thread programs run concurrently (group-committed) and one
// after another end in identical volumes.
TEST(MetaStoreGroupCommit, ConcurrentResultsEqualSerialResults) {
  constexpr int kThreads = 4;
  constexpr int kOps = 60;
  auto program = [](MetaStore& s, uint64_t dir, uint64_t file, uint64_t v0,
                    int t) {
    std::mt19937 rng(77 + t);
    uint64_t v = v0;
    std::vector<uint64_t> cur(4, 0);
    for (int i = 0; i < kOps; ++i) {
      const std::string n = "e" + std::to_string(rng() % 8);
      switch (rng() % 6) {
        case 0:
          (void)s.MkNode(dir, n, S_IFREG | 0644, 0, 0, 0);
          break;
        case 1:
          (void)s.Mkdir(dir, n, 0755, 0, 0);
          break;
        case 2:
          (void)s.Unlink(dir, n);
          break;
        case 3: {
          uint64_t replaced = 0;
          (void)s.Rename(dir, n, dir, "r" + std::to_string(rng() % 4), 0,
                         &replaced);
          break;
        }
        case 4: {
          std::vector<StripeCommit> c;
          for (uint64_t st = 0; st < 4; st += 1 + rng() % 2) {
            c.push_back({{st, v, 0, 4096}, cur[st]});
            cur[st] = v++;
          }
          std::vector<ObsoleteStripe> ob;
          EXPECT_TRUE(s.CommitStripes(file, c, 0, &ob).ok());
          break;
        }
        default: {
          SetAttrRequest r;
          r.mask = kSetMode;
          r.mode = 0600 + static_cast<uint32_t>(rng() % 64);
          std::vector<ObsoleteStripe> ob;
          (void)s.SetAttr(file, r, &ob);
          break;
        }
      }
    }
  };
  // A store, per-thread dirs and files, and each thread's version range.
  struct Setup {
    TempDir tmp;
    std::unique_ptr<MetaStore> s;
    std::vector<uint64_t> dirs, files, v0;
  };
  auto make = [&](Setup* x) {
    x->s =
        std::move(MetaStore::Create(x->tmp.sub("meta"), Geometry{4, 2, 4096}))
            .value();
    for (int t = 0; t < kThreads; ++t) {
      x->dirs.push_back(
          x->s->Mkdir(kRootInode, "d" + std::to_string(t), 0755, 0, 0)->ino);
      x->files.push_back(x->s->MkNode(kRootInode, "f" + std::to_string(t),
                                      S_IFREG | 0644, 0, 0, 0)
                             ->ino);
      x->v0.push_back(*x->s->AllocateVersions(kOps * 4));
    }
  };
  // The volume as comparable values: names, kinds, and stripe maps.
  auto describe = [&](Setup* x) {
    std::vector<std::string> out;
    for (int t = 0; t < kThreads; ++t) {
      for (const auto& e : testing::ReadAll(*x->s, x->dirs[t]))
        out.push_back(std::to_string(t) + "/" + e.name + ":" +
                      std::to_string(e.mode));
      out.push_back("mode" + std::to_string(x->s->GetAttr(x->files[t])->mode));
      auto stripes = x->s->GetStripes(x->files[t], 0, 8);
      EXPECT_TRUE(stripes.ok());
      if (!stripes.ok()) continue;
      for (const auto& sv : *stripes)
        out.push_back("s" + std::to_string(sv.stripe) + "@" +
                      std::to_string(sv.version - x->v0[t]));
    }
    return out;
  };
  Setup serial, concurrent;
  make(&serial);
  make(&concurrent);
  for (int t = 0; t < kThreads; ++t)
    program(*serial.s, serial.dirs[t], serial.files[t], serial.v0[t], t);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      program(*concurrent.s, concurrent.dirs[t], concurrent.files[t],
              concurrent.v0[t], t);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(describe(&serial), describe(&concurrent));
  CheckInvariants(*concurrent.s);
  // Durable: the same after reopening.
  const auto before = describe(&concurrent);
  const std::string dir = concurrent.tmp.sub("meta");
  concurrent.s.reset();
  concurrent.s = std::move(MetaStore::Open(dir)).value();
  EXPECT_EQ(describe(&concurrent), before);
}

}  // namespace
}  // namespace stripefs

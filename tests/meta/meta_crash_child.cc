// Child process of the MetaStore crash test: opens an existing store and
// performs random mutations until it is killed with SIGKILL. After each
// acknowledged mutation the parent must be able to verify, it appends one
// line to the ack file (a small O_APPEND write, so it is all or nothing):
//   V <first> <count>   AllocateVersions returned [first, first+count)
//   L <name>            MkNode(log, name) returned OK
//   u <name>            about to unlink such an entry
//   U <name>            that Unlink(log, name) returned OK
//   c <stripe> <ver>    about to commit <ver> to stripe <stripe> of "data"
//   C <stripe> <ver>    that commit returned OK
//   B <n> <s1> <v1> ...  about to commit these n stripes of "data" in one
//                       CommitStripes (each also has its own c line, and a
//                       C line once the call returned OK)
//   S                   (LAZY_MS > 0 only) Sync() returned OK: every change
//                       acknowledged before it is durable
// Usage: meta_crash_child DIR SEED ACKFILE [THREADS [LAZY_MS]]: THREADS-1
// extra threads create log entries and allocate versions concurrently with
// the random loop, so the group commit path is killed mid-flight too. With
// LAZY_MS > 0 the store acknowledges namespace mutations before their WAL
// sync (namespace_sync_delay) and the child does namespace work only
// (creates, unlinks, the play tree), so most acknowledged changes are
// unsynced when the kill comes. Exit 2 on an
// unexpected error (EIO, corruption...), 3 on bad usage; never exits normally
// otherwise within the bounded loop's expected run time.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/meta/meta_store.h"

namespace stripefs {
namespace {

int ack_fd = -1;

void Ack(const std::string& line) {
  std::string l = line + "\n";
  if (write(ack_fd, l.data(), l.size()) != static_cast<ssize_t>(l.size())) {
    std::_Exit(2);
  }
}

// Errors a random operation may legitimately hit.
bool Expected(int code) {
  switch (code) {
    case 0:
    case ENOENT:
    case EEXIST:
    case ENOTEMPTY:
    case EISDIR:
    case ENOTDIR:
    case EINVAL:
    case EPERM:
    case EBUSY:
    case ESTALE:
    case ENODATA:
      return true;
    default:
      return false;
  }
}

void Check(const Status& s, const char* what) {
  if (!Expected(s.code())) {
    std::fprintf(stderr, "crash child: %s: %s\n", what, s.ToString().c_str());
    std::_Exit(2);
  }
}

template <typename T>
T MustOk(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "crash child: %s: %s\n", what,
                 r.status().ToString().c_str());
    std::_Exit(2);
  }
  return std::move(r).value();
}

// Extra thread: acknowledged creates, unlinks and allocations only.
void Background(MetaStore* store, uint64_t log, unsigned seed, int tid,
                bool lazy) {
  for (uint64_t i = 0; i < 1000000; ++i) {
    std::string name = "t" + std::to_string(seed) + "_" + std::to_string(tid) +
                       "_" + std::to_string(i);
    MustOk(store->MkNode(log, name, S_IFREG | 0644, 0, 0, 0), "log entry");
    Ack("L " + name);
    if (i % 3 == 1) {
      Ack("u " + name);
      MustOk(store->Unlink(log, name), "unlink log entry");
      Ack("U " + name);
    }
    if (lazy) continue;  // allocations sync the WAL: namespace work only
    uint64_t first = MustOk(store->AllocateVersions(3), "allocate");
    Ack("V " + std::to_string(first) + " 3");
  }
}

int Run(const std::string& dir, unsigned seed, int threads, int lazy_ms) {
  MetaStoreOptions options;
  options.namespace_sync_delay = std::chrono::milliseconds(lazy_ms);
  const bool lazy = lazy_ms > 0;
  auto store = MustOk(MetaStore::Open(dir, options), "open");
  const Geometry geo = MustOk(store->GetGeometry(), "geometry");
  const uint64_t S = geo.stripe_size();
  const uint64_t log = MustOk(store->Lookup(kRootInode, "log"), "log").ino;
  const uint64_t play = MustOk(store->Lookup(kRootInode, "play"), "play").ino;
  const uint64_t data = MustOk(store->Lookup(kRootInode, "data"), "data").ino;
  for (int t = 1; t < threads; ++t) {
    std::thread(Background, store.get(), log, seed, t, lazy).detach();
  }
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto pool_name = [&]() { return "n" + std::to_string(pick(12)); };

  // A random directory of the play tree (at most three levels down).
  auto random_dir = [&]() {
    uint64_t d = play;
    for (int depth = 0; depth < 3 && pick(2); ++depth) {
      auto es = MustOk(store->ReadDir(d, 2, 64), "readdir");
      std::vector<uint64_t> subs;
      for (auto& e : es) {
        if (S_ISDIR(e.mode)) subs.push_back(e.ino);
      }
      if (subs.empty()) break;
      d = subs[pick(subs.size())];
    }
    return d;
  };
  auto random_entry = [&](uint64_t d) -> std::string {
    auto es = MustOk(store->ReadDir(d, 2, 64), "readdir");
    if (es.empty()) return pool_name();
    return es[pick(es.size())].name;
  };

  for (uint64_t i = 0; i < 1000000; ++i) {
    if (lazy && pick(40) == 0) {
      // A sync point (what an fsync or fsyncdir of the mount asks for).
      Status st = store->Sync();
      if (!st.ok()) {
        std::fprintf(stderr, "crash child: sync: %s\n", st.ToString().c_str());
        std::_Exit(2);
      }
      Ack("S");
    }
    size_t op = pick(100);
    // Lazy: no stripe commits or allocations, which would sync the WAL.
    if (lazy && op < 40) op = 10 + pick(15);
    if (op < 10) {
      uint32_t count = 1 + static_cast<uint32_t>(pick(40));
      uint64_t first = MustOk(store->AllocateVersions(count), "allocate");
      Ack("V " + std::to_string(first) + " " + std::to_string(count));
    } else if (op < 25) {
      std::string name = "e" + std::to_string(seed) + "_" + std::to_string(i);
      MustOk(store->MkNode(log, name, S_IFREG | 0644, 0, 0, 0), "log entry");
      Ack("L " + name);
      if (pick(3) == 0) {
        Ack("u " + name);
        MustOk(store->Unlink(log, name), "unlink log entry");
        Ack("U " + name);
      }
    } else if (op < 30) {
      // Several stripes at once: all committed or none.
      std::vector<StripeCommit> commits;
      std::string batch;
      const uint64_t first = pick(8);
      const uint64_t n = 2 + pick(3);
      for (uint64_t j = 0; j < n; ++j) {
        const uint64_t s = (first + j) % 8;
        auto cur = MustOk(store->GetStripes(data, s, 1), "get stripes");
        uint64_t v = MustOk(store->AllocateVersions(1), "allocate");
        Ack("V " + std::to_string(v) + " 1");
        Ack("c " + std::to_string(s) + " " + std::to_string(v));
        commits.push_back(
            {{s, v, 0, geo.cell_size}, cur.empty() ? 0 : cur[0].version});
        batch += " " + std::to_string(s) + " " + std::to_string(v);
      }
      Ack("B " + std::to_string(n) + batch);
      std::vector<ObsoleteStripe> ob;
      uint64_t last = 0;
      for (const auto& c : commits) last = std::max(last, c.sv.stripe);
      Status st = store->CommitStripes(data, commits, (last + 1) * S, &ob);
      if (!st.ok()) {
        std::fprintf(stderr, "crash child: commit stripes: %s\n",
                     st.ToString().c_str());
        std::_Exit(2);
      }
      for (const auto& c : commits)
        Ack("C " + std::to_string(c.sv.stripe) + " " +
            std::to_string(c.sv.version));
    } else if (op < 40) {
      uint64_t s = pick(8);
      auto cur = MustOk(store->GetStripes(data, s, 1), "get stripes");
      uint64_t expected = cur.empty() ? 0 : cur[0].version;
      uint64_t v = MustOk(store->AllocateVersions(1), "allocate");
      Ack("V " + std::to_string(v) + " 1");
      Ack("c " + std::to_string(s) + " " + std::to_string(v));
      ObsoleteStripe ob;
      Status st = store->CommitStripe(data, {s, v, 0, geo.cell_size}, expected,
                                      (s + 1) * S, &ob);
      if (!st.ok()) {
        std::fprintf(stderr, "crash child: commit: %s\n",
                     st.ToString().c_str());
        std::_Exit(2);
      }
      Ack("C " + std::to_string(s) + " " + std::to_string(v));
    } else {
      uint64_t d = random_dir();
      switch (pick(10)) {
        case 0:
        case 1:
          Check(store->MkNode(d, pool_name(), S_IFREG | 0644, 0, 0, 0).status(),
                "mknod");
          break;
        case 2:
          Check(store->Mkdir(d, pool_name(), 0755, 0, 0).status(), "mkdir");
          break;
        case 3:
          Check(store->Unlink(d, random_entry(d)).status(), "unlink");
          break;
        case 4:
          Check(store->Rmdir(d, random_entry(d)), "rmdir");
          break;
        case 5:
        case 6: {
          uint64_t to = random_dir();
          uint64_t replaced = 0;
          Check(store->Rename(d, random_entry(d), to, pool_name(),
                              static_cast<uint32_t>(pick(3)), &replaced),
                "rename");
          break;
        }
        case 7: {
          auto a = store->Lookup(d, random_entry(d));
          if (a.ok()) {
            Check(store->Link(a->ino, random_dir(), pool_name()).status(),
                  "link");
          }
          break;
        }
        case 8: {
          if (lazy) break;  // commits and truncations sync the WAL
          // Give a file stripes, then truncate it.
          auto a = store->Lookup(d, random_entry(d));
          if (!a.ok() || !S_ISREG(a->mode)) break;
          uint64_t s = pick(4);
          auto cur = MustOk(store->GetStripes(a->ino, s, 1), "get stripes");
          uint64_t v = MustOk(store->AllocateVersions(1), "allocate");
          Ack("V " + std::to_string(v) + " 1");
          Check(store->CommitStripe(a->ino, {s, v, 0, 4096},
                                    cur.empty() ? 0 : cur[0].version,
                                    s * S + 1 + pick(S), nullptr),
                "commit");
          SetAttrRequest r;
          r.mask = kSetSize;
          r.size = pick(4 * S);
          std::vector<ObsoleteStripe> ob;
          Check(store->SetAttr(a->ino, r, &ob).status(), "truncate");
          break;
        }
        case 9: {
          if (pick(2)) {
            Check(store->SetXattr(d, "user." + pool_name(), "v", 0), "xattr");
          } else {
            for (uint64_t o : MustOk(store->ListOrphans(), "orphans")) {
              std::vector<ObsoleteStripe> ob;
              Check(store->PurgeInode(o, &ob), "purge");
            }
          }
          break;
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace stripefs

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr,
                 "usage: meta_crash_child DIR SEED ACKFILE [THREADS "
                 "[LAZY_MS]]\n");
    return 3;
  }
  const int threads = argc >= 5 ? std::atoi(argv[4]) : 1;
  const int lazy_ms = argc == 6 ? std::atoi(argv[5]) : 0;
  stripefs::ack_fd = open(argv[3], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (stripefs::ack_fd < 0) return 3;
  // Never returns normally in the test: it is killed first. (The detached
  // threads keep running; _Exit avoids tearing the store down under them.)
  int rc = stripefs::Run(argv[1], static_cast<unsigned>(std::atoi(argv[2])),
                         threads, lazy_ms);
  std::_Exit(rc);
}

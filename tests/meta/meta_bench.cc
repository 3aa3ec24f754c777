// meta_bench: throughput of MetaStore operations on a real disk, with the
// WAL synced (as in production), for 1, 4 and 16 client threads. Not a
// test (wall-clock numbers); run by hand:
//   build/tests/meta/meta_bench [DIR]   (default: a fresh dir under /tmp)
// Prints one line per (operation, threads): operations per second.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backend/meta/meta_store.h"

namespace stripefs {
namespace {

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "meta_bench: %s: %s\n", what,
                 r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

// Runs op(thread, i) for i in [0, per_thread) on `threads` threads; returns
// operations per second.
double Measure(int threads, int per_thread,
               const std::function<void(int, int)>& op) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) op(t, i);
    });
  }
  for (auto& th : ts) th.join();
  double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return threads * per_thread / sec;
}

int Main(const std::string& base) {
  const Geometry geo{4, 2, 256 * 1024};
  std::printf("%-28s %8s %12s\n", "operation", "threads", "ops/s");
  for (int threads : {1, 4, 16}) {
    std::string dir = base + "/t" + std::to_string(threads);
    std::filesystem::remove_all(dir);
    auto store = Must(MetaStore::Create(dir, geo), "create");
    MetaStore& s = *store;
    const int n = threads == 1 ? 200 : 100;
    std::vector<uint64_t> dirs;
    for (int t = 0; t < threads; ++t) {
      dirs.push_back(
          Must(s.Mkdir(kRootInode, "d" + std::to_string(t), 0755, 0, 0),
               "mkdir")
              .ino);
    }
    auto report = [&](const char* name, double v) {
      std::printf("%-28s %8d %12.0f\n", name, threads, v);
      std::fflush(stdout);
    };
    report("create (own dir)", Measure(threads, n, [&](int t, int i) {
             Must(s.MkNode(dirs[t], "f" + std::to_string(i), S_IFREG | 0644, 0,
                           0, 0),
                  "mknod");
           }));
    report("create (shared dir)", Measure(threads, n, [&](int t, int i) {
             Must(s.MkNode(kRootInode,
                           "s" + std::to_string(t) + "_" + std::to_string(i),
                           S_IFREG | 0644, 0, 0, 0),
                  "mknod");
           }));
    std::vector<uint64_t> files;
    for (int t = 0; t < threads; ++t) {
      files.push_back(Must(s.Lookup(dirs[t], "f0"), "lookup").ino);
    }
    report("commit stripe (own file)", Measure(threads, n, [&](int t, int i) {
             uint64_t v = Must(s.AllocateVersions(1), "allocate");
             Status st =
                 s.CommitStripe(files[t], {uint64_t(i), v, 0, 4096}, 0,
                                (uint64_t(i) + 1) * geo.stripe_size(), nullptr);
             if (!st.ok()) std::exit(1);
           }));
    report("rename (own dir)", Measure(threads, n, [&](int t, int i) {
             Status st = s.Rename(dirs[t], "f" + std::to_string(i), dirs[t],
                                  "g" + std::to_string(i), 0, nullptr);
             if (!st.ok()) std::exit(1);
           }));
    report("lookup", Measure(threads, 20 * n, [&](int t, int i) {
             Must(s.Lookup(dirs[t], "g" + std::to_string(i % n)), "lookup");
           }));
    report("getattr", Measure(threads, 20 * n, [&](int t, int) {
             Must(s.GetAttr(files[t]), "getattr");
           }));
    report("readdir entries",
           Measure(threads, 20, [&](int t, int) {
             uint64_t cookie = 0;
             for (;;) {
               auto page = Must(s.ReadDir(dirs[t], cookie, 128), "readdir");
               if (page.empty()) break;
               cookie = page.back().cookie;
             }
           }) * (n + 2));
    store.reset();
    std::filesystem::remove_all(dir);
  }
  return 0;
}

}  // namespace
}  // namespace stripefs

int main(int argc, char** argv) {
  std::string base;
  bool own = argc < 2;
  if (own) {
    char tmpl[] = "/tmp/stripefs-meta-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    base = tmpl;
  } else {
    base = argv[1];
  }
  int rc = stripefs::Main(base);
  if (own) std::filesystem::remove_all(base);
  return rc;
}

// `stripefs bench cluster|transport|align|write|read|meta|placement
// [args...]`: runs a benchmark driver, one per subcommand (kDrivers below),
// a python script or (placement) a C++ program of the build tree:
//   cluster    bench/cluster/bench_cluster.py: fio through a mounted local
//              cluster, healthy/degraded/repair, tmpfs and passthrough_ll
//   transport  bench/fuse/transport_bench.py: /dev/fuse vs io-uring on an
//              embedded volume, passthrough_ll and tmpfs reference rows
//   align      bench/align/align_bench.py: stripe-aligned WRITE % vs bdi
//              max_ratio
//   write      bench/write/write_bench.py: the write path vs the disk
//              reference, one `ratio=` line per row
//   read       bench/read/read_bench.py: the read path vs passthrough_ll
//              and the disk, one `ratio=` line per row
//   meta       bench/meta/meta_bench.py: create/stat/rename/unlink/readdir
//              on RocksDB, metad and etcd-backed volumes vs passthrough_ll
//   placement  bench/placement/placement_bench (built next to this binary's
//              build tree): the real Placement at 10^4 servers
//
// The python drivers share bench/lib/. This command finds a driver by
// walking up from the directory of this binary (or takes --script) and execs
// it (python ones with python3) with the remaining arguments, passing this
// binary's path in STRIPEFS_BIN.
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tools/command.h"

namespace stripefs::tools {
namespace {

namespace fs = std::filesystem;

struct Driver {
  const char* name;    // the subcommand
  const char* script;  // path below the source root
  const char* help;
  bool native = false;  // an executable, not a python script
};

constexpr Driver kDrivers[] = {
    {"cluster", "bench/cluster/bench_cluster.py",
     "fio through a mounted local N-server cluster: healthy, degraded and "
     "repair phases plus tmpfs and passthrough_ll reference rows"},
    {"transport", "bench/fuse/transport_bench.py",
     "fio on an embedded volume mounted over /dev/fuse and over io-uring "
     "(enable_uring set and restored), interleaved repetitions, medians and "
     "uring/dev ratios, plus passthrough_ll and tmpfs reference rows"},
    {"align", "bench/align/align_bench.py",
     "stripe-aligned FUSE WRITE % and backend full-stripe % vs the mount's "
     "bdi max_ratio, coalescing on and off (embedded volumes, dd)"},
    {"write", "bench/write/write_bench.py",
     "the write path vs the disk reference (fio O_DIRECT 1 MiB QD8 in the "
     "same run): chunk store, cluster and embedded mounts, CPU per MiB, "
     "random writes, creates/unlinks, partial stripes; one ratio= line per "
     "row, CSV and markdown under --out (docs/results/write/ with "
     "--update-docs)"},
    {"read", "bench/read/read_bench.py",
     "the read path: 4 KiB random reads (embedded and cluster) vs "
     "passthrough_ll, cluster 1 MiB sequential reads vs the disk and with "
     "one server down, daemon CPU per read; one ratio= line per row, "
     "results in --out (docs/results/read/ only with --update-docs)"},
    {"meta", "bench/meta/meta_bench.py",
     "create, stat, rename, unlink and readdir over many files in 4 "
     "directories: embedded RocksDB, one metad, etcd-backed with 1 and 2 "
     "metads, passthrough_ll over tmpfs; ratio= lines, load average"},
    {"placement", "bench/placement/placement_bench",
     "simulates the real Placement at 10^4 servers (failure domains) and "
     "10^7 stripes (--quick: 10^3 / 10^6): max/mean chunks per server, "
     "chunks moved on server down/out/removed/added, time and memory per "
     "placement",
     true},
};

// Returns the driver script `rel` found above the binary's directory, or "".
std::string FindScript(const std::string& self, const char* rel) {
  std::error_code ec;
  fs::path dir = fs::path(self).parent_path();
  for (int depth = 0; depth < 8 && !dir.empty(); ++depth) {
    fs::path candidate = dir / rel;
    if (fs::exists(candidate, ec)) return candidate.string();
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return "";
}

int RunBenchScript(const char* rel, bool native, const std::string& script_flag,
                   const std::vector<std::string>& args) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::perror("stripefs: readlink /proc/self/exe");
    return 1;
  }
  self[n] = '\0';
  std::string script =
      script_flag.empty() ? FindScript(self, rel) : script_flag;
  if (script.empty() || !fs::exists(script)) {
    std::fprintf(stderr,
                 "stripefs: bench driver %s not found above %s; run from a "
                 "source checkout's build dir or pass --script PATH\n",
                 script.empty() ? rel : script.c_str(), self);
    return 1;
  }
  setenv("STRIPEFS_BIN", self, 1);
  // Debian's python3 has matplotlib; prefer it over one earlier in PATH.
  const char* python =
      access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<char*> argv;
  if (!native) argv.push_back(const_cast<char*>(python));
  argv.push_back(script.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "stripefs: cannot exec %s: %s\n", argv[0],
               std::strerror(errno));
  return 1;
}

CommandRegistration bench_commands([](CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  for (const Driver& d : kDrivers) {
    auto* cmd = bench->add_subcommand(
        d.name, std::string(d.help) + " (other options are passed to " +
                    d.script + "; run it with --help to list them)");
    auto script = std::make_shared<std::string>();
    cmd->add_option("--script", *script,
                    std::string("path of ") + d.script +
                        " (default: found above the stripefs binary)");
    cmd->prefix_command();
    cmd->callback([cmd, script, rel = d.script, native = d.native] {
      ExitWith(RunBenchScript(rel, native, *script, cmd->remaining()));
    });
  }
});

}  // namespace
}  // namespace stripefs::tools

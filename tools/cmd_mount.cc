// `stripefs mkfs DIR`, `stripefs mount DIR MNT`, `stripefs umount MNT`:
// create an embedded volume, serve it through our FUSE engine (StripeFs),
// unmount it. See docs/filesystem.md.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "backend/client/volume.h"
#include "backend/meta/meta_store.h"
#include "backend/rpc/client_lease.h"
#include "common/human_bytes.h"
#include "common/option_list.h"
#include "common/stop_signals.h"
#include "fs/mount_service.h"
#include "fs/stats_socket.h"
#include "fuse/fuse_mount.h"
#include "metrics/mount_metrics.h"
#include "tools/command.h"
#include "tools/option_ranges.h"
#include "tools/readiness.h"

namespace stripefs::tools {
namespace {

namespace sfs = std::filesystem;

// "256K", "1M", "4MiB", "262144" -> bytes.
std::optional<uint64_t> ParseBytes(std::string s) {
  if (s.empty()) return std::nullopt;
  uint64_t mult = 1;
  while (!s.empty() && (s.back() == 'B' || s.back() == 'b' || s.back() == 'i'))
    s.pop_back();
  if (!s.empty()) {
    switch (s.back()) {
      case 'K':
      case 'k':
        mult = 1024;
        s.pop_back();
        break;
      case 'M':
      case 'm':
        mult = 1024 * 1024;
        s.pop_back();
        break;
      case 'G':
      case 'g':
        mult = 1024ull * 1024 * 1024;
        s.pop_back();
        break;
      default:
        break;
    }
  }
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (*end != '\0') return std::nullopt;
  return v * mult;
}

struct GeometryFlags {
  std::optional<uint32_t> k, m;
  std::string cell;  // "" = default
};

void AddGeometryFlags(CLI::App* c, GeometryFlags* g) {
  c->add_option("--k", g->k, "data chunks per stripe (default 4)")
      ->check(InRange(fs::kDataChunksRange));
  c->add_option("--m", g->m, "parity chunks per stripe (default 2)")
      ->check(InRange(fs::kParityChunksRange));
  c->add_option("--cell-size", g->cell,
                "bytes per chunk, a multiple of 4K up to 64M: 256K (default), "
                "1M");
}

Result<fs::GeometryChoice> ToGeometry(const GeometryFlags& f) {
  fs::GeometryChoice g;
  g.k = f.k;
  g.m = f.m;
  if (!f.cell.empty()) {
    auto cell = ParseBytes(f.cell);
    if (!cell || *cell > uint64_t(fs::kCellSizeRange.max)) {
      return Status::InvalidArgument(
          "--cell-size '" + f.cell +
          "': give a multiple of 4K in [4K, 64M], e.g. 256K");
    }
    g.cell_size = static_cast<uint32_t>(*cell);
  }
  STRIPEFS_RETURN_IF_ERROR(fs::ValidateGeometryChoice(g));
  return g;
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "stripefs: %s\n", msg.c_str());
  return 1;
}

// ---------------------------------------------------------------- mkfs ----

int RunMkfs(const std::string& dir, const GeometryFlags& gf) {
  auto g = ToGeometry(gf);
  if (!g.ok()) return Fail(g.status().message());
  if (MetaStore::Exists((sfs::path(dir) / "meta").string())) {
    return Fail(dir +
                " already holds a stripefs volume; mount it with "
                "`stripefs mount " +
                dir + " MNT`, or pick an empty directory");
  }
  EmbeddedVolumeOptions o;
  o.geometry = g->Resolve();
  o.root_uid = ::getuid();
  o.root_gid = ::getgid();
  auto v = Volume::OpenEmbedded(dir, o);
  if (!v.ok()) return Fail("mkfs " + dir + ": " + v.status().ToString());
  const Geometry& have = (*v)->geometry();
  std::printf("created stripefs volume in %s: %u+%u, cell %s, stripe %s\n",
              dir.c_str(), have.k, have.m, HumanBytes(have.cell_size).c_str(),
              HumanBytes(have.stripe_size()).c_str());
  return 0;
}

// --------------------------------------------------------------- mount ----

struct MountArgs {
  std::vector<std::string> positional;
  std::string meta_address, key_file;
  GeometryFlags geometry;
  bool foreground = false;
  std::string coalesce = "on";
  std::string transport = "auto";
  std::string dev_wait = "read";
  int max_ratio = -1;
  std::vector<std::string> options;  // -o
  int64_t idle_flush_ms = 2000;
  int64_t frontier_hold_ms = 30000;
  int64_t entry_timeout_ms = 1000;
  int64_t attr_timeout_ms = 1000;
  std::string compound = "on";
  int64_t memory_cap_mib = 256;
  std::string writeback_cache = "on";
  int dev_threads = 4;
  int uring_read_workers = 4;
  int uring_queues = 0;  // 0: one per possible CPU
  std::string uring_lone_reads = "inline";
  std::string uring_try_reads = "on";
  bool no_align = false;
  bool enable_uring = false;
  int meta_hold_s = 60;
  std::string degraded_writes = "allow";  // or "refuse"
  int send_window = -1;                   // -1: from the stripe size
  int file_send_window = -1;              // -1: from the stripe size
  std::string fsname;   // the source /proc/mounts shows ("" = the volume's)
  bool quiet = false;   // print errors only (mount(8) helper)
  std::string metrics;  // ADDR:PORT of /metrics; empty: none
};

// Where the daemon tells the waiting parent how the mount went.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void Say(const std::string& s) {
    if (fd_ >= 0) {
      std::string line = s + "\n";
      (void)!::write(fd_, line.data(), line.size());
    } else {
      std::printf("%s\n", s.c_str());
      std::fflush(stdout);
    }
  }
  int Error(const std::string& s) {
    if (fd_ >= 0) {
      std::string line = "E" + s + "\n";
      (void)!::write(fd_, line.data(), line.size());
      Close();
    } else {
      std::fprintf(stderr, "stripefs: %s\n", s.c_str());
    }
    return 1;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

Result<fs::MountServiceOptions> ToServiceOptions(const MountArgs& a,
                                                 const std::string& dir,
                                                 const std::string& mnt) {
  fs::MountServiceOptions o;
  o.mountpoint = mnt;
  o.volume_dir = dir;
  o.meta_address = a.meta_address;
  o.key_file = a.key_file;
  STRIPEFS_ASSIGN_OR_RETURN(o.geometry, ToGeometry(a.geometry));
  o.root_uid = ::getuid();
  o.root_gid = ::getgid();
  o.fs.coalesce = a.coalesce != "off";
  o.fs.idle_flush = std::chrono::milliseconds(a.idle_flush_ms);
  o.fs.frontier_hold = std::chrono::milliseconds(a.frontier_hold_ms);
  o.fs.entry_timeout = std::chrono::milliseconds(a.entry_timeout_ms);
  o.fs.attr_timeout = std::chrono::milliseconds(a.attr_timeout_ms);
  o.compound = a.compound != "off";
  o.refuse_compound = a.compound == "enosys";
  o.fs.memory_cap = static_cast<uint64_t>(a.memory_cap_mib) << 20;
  constexpr size_t kAuto = fs::StripeFsOptions::kWindowFromStripeSize;
  o.fs.send_window =
      a.send_window < 0 ? kAuto : static_cast<size_t>(a.send_window);
  o.fs.file_send_window =
      a.file_send_window < 0 ? kAuto : static_cast<size_t>(a.file_send_window);
  o.meta_hold_s = a.meta_hold_s;
  STRIPEFS_ASSIGN_OR_RETURN(o.transport,
                            fuse::ParseTransportChoice(a.transport));
  o.dev_threads = a.dev_threads;
  o.dev_poll = a.dev_wait == "poll";
  o.uring_read_workers = a.uring_read_workers;
  o.uring_queues = a.uring_queues;
  o.uring_inline_lone_reads = a.uring_lone_reads == "inline";
  o.uring_try_reads = a.uring_try_reads != "off";
  o.writeback_cache = a.writeback_cache != "off";
  o.align = !a.no_align;
  o.enable_uring = a.enable_uring;
  o.max_ratio = a.max_ratio;
  // -o secure is ours (encrypted RPC traffic), not the kernel's.
  // -o degraded_writes=allow|refuse is ours too (overrides the flag).
  std::string degraded = a.degraded_writes;
  for (const std::string& opt : a.options) {
    if (opt == "secure")
      o.secure_wire = true;
    else if (opt.rfind("degraded_writes=", 0) == 0)
      degraded = opt.substr(16);
    else
      o.mount_options.push_back(opt);
  }
  if (degraded != "allow" && degraded != "refuse")
    return Status::InvalidArgument("degraded_writes=" + degraded +
                                   ": expected allow or refuse");
  o.refuse_degraded_writes = degraded == "refuse";
  if (o.secure_wire && o.meta_address.empty())
    return Status::InvalidArgument(
        "-o secure encrypts cluster traffic: it needs a cluster mount "
        "(--meta HOST:PORT --key FILE); drop it for a volume directory");
  o.fsname = a.fsname;
  STRIPEFS_RETURN_IF_ERROR(fs::ValidateMountOptions(o));
  return o;
}

// A cluster mount heartbeats metad so `stripefs status` counts it
// (backend/rpc/client_lease.h); best effort, never fails the mount.
std::unique_ptr<rpc::ClientLease> AnnounceToMetad(
    const fs::MountServiceOptions& o) {
  if (o.meta_address.empty()) return nullptr;
  auto key = rpc::ClusterKey::Load(o.key_file);
  if (!key.ok()) return nullptr;  // the mount itself already loaded it
  if ((*key)->principal() == rpc::Principal::kServer) {
    // Migration: a one-key cluster keeps working, but say what it means.
    std::fprintf(stderr,
                 "stripefs mount: warning: %s is the cluster's server key: "
                 "this mount may call every RPC (cluster map, whole-chunk "
                 "deletes); give it a client identity instead: `stripefs "
                 "auth add client.NAME --out FILE` (docs/cluster.md "
                 "\"Identities\")\n",
                 o.key_file.c_str());
  }
  return std::make_unique<rpc::ClientLease>(
      o.meta_address, (*key)->WithSecureWire(o.secure_wire), "mount",
      o.mountpoint);
}

// Mounts, reports, serves until unmounted. With a `log` path (the daemon),
// stdout and stderr move to it once the mount is reported.
int Serve(fs::MountServiceOptions o, const std::string& metrics_addr,
          Reporter& rep, const std::string& log) {
  // Stop signals count from here on, so one during the mount is not lost.
  auto stop = StopSignals::Install({SIGINT, SIGTERM, SIGHUP});
  if (!stop.ok()) return rep.Error(stop.status().ToString());
  auto registry = std::make_shared<prometheus::Registry>();
  metrics::FuseLatencyHistograms latencies(*registry);
  if (!metrics_addr.empty()) o.request_observer = &latencies;
  auto service = fs::MountService::Start(o);
  if (!service.ok()) return rep.Error(service.status().ToString());
  auto exporter =
      metrics::ServeMountMetrics(metrics_addr, registry, &(*service)->fs());
  if (!exporter.ok()) return rep.Error(exporter.status().ToString());
  if (*exporter)
    rep.Say("metrics on http://" + (*exporter)->address() + "/metrics");
  for (const auto& line : (*service)->Describe()) rep.Say(line);
  std::fflush(nullptr);
  if (!log.empty()) {
    // The directory was checked before the fork (RunMount).
    auto fd = fs::OpenLogFile(log);
    if (!fd.ok()) {
      rep.Say("log: not written: " + fd.status().message());
    } else {
      ::dup2(*fd, 1);
      ::dup2(*fd, 2);
      ::close(*fd);
    }
  }
  rep.Close();
  // Also in the daemon's log (the report above went to the mounting
  // command, which mount(8) keeps quiet).
  if (*exporter && !log.empty())
    std::fprintf(stderr, "stripefs: metrics on http://%s/metrics\n",
                 (*exporter)->address().c_str());
  std::unique_ptr<rpc::ClientLease> lease = AnnounceToMetad(o);
  NotifyReady("mounted at " + o.mountpoint);
  Status why = (*service)->ServeUntilUnmounted(**stop);
  NotifyStopping();
  exporter->reset();  // stop serving before the file system goes away
  Status fin = (*service)->Stop();
  lease.reset();  // leaves metad's client list
  if (!why.ok())
    std::fprintf(stderr, "stripefs: session ended: %s\n",
                 why.ToString().c_str());
  if (!fin.ok()) std::fprintf(stderr, "stripefs: %s\n", fin.ToString().c_str());
  std::fflush(nullptr);
  return why.ok() && fin.ok() ? 0 : 1;
}

// Prints the daemon's report; false when it reported a failure (or none).
bool RelayReport(const std::string& all, const std::string& log, bool quiet) {
  bool failed = all.empty();
  size_t pos = 0;
  while (pos < all.size()) {
    size_t nl = all.find('\n', pos);
    std::string line =
        all.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!line.empty() && line[0] == 'E') {
      std::fprintf(stderr, "stripefs: %s\n", line.c_str() + 1);
      failed = true;
    } else if (!quiet) {
      std::printf("%s\n", line.c_str());
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  if (all.empty()) {
    std::fprintf(stderr,
                 "stripefs: the mount daemon exited without a report (see "
                 "%s)\n",
                 log.c_str());
  }
  return !failed;
}

int RunMount(const MountArgs& a) {
  std::string dir, mnt;
  if (!a.meta_address.empty()) {
    if (a.positional.size() != 1)
      return Fail(
          "with --meta give only the mountpoint: stripefs mount --meta "
          "HOST:PORT --key FILE MNT");
    mnt = a.positional[0];
  } else {
    if (a.positional.size() != 2)
      return Fail(
          "usage: stripefs mount DIR MNT (DIR: volume directory, created if "
          "empty)");
    dir = a.positional[0];
    mnt = a.positional[1];
  }
  char abs[PATH_MAX];
  if (::realpath(mnt.c_str(), abs)) mnt = abs;
  std::error_code ec;
  mnt = sfs::absolute(mnt, ec).lexically_normal().string();
  if (!dir.empty()) dir = sfs::absolute(dir, ec).lexically_normal().string();
  auto o = ToServiceOptions(a, dir, mnt);
  if (!o.ok()) return Fail(o.status().message());
  if (!a.metrics.empty()) {
    if (Status s = metrics::CheckListenAddress(a.metrics); !s.ok())
      return Fail(s.message());
  }

  if (a.foreground) {
    Reporter rep(-1);
    return Serve(*o, a.metrics, rep, "");
  }
  // Daemon: the child mounts and reports through a pipe; the parent prints
  // the report and exits once the mount is live (or failed). Until then the
  // child's stderr is still the terminal, so what libfuse prints about a
  // rejected -o option is seen there; afterwards it goes to the log.
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return Fail(std::string("pipe: ") + std::strerror(errno));
  const fs::RuntimePaths rp = fs::RuntimePathsFor(mnt);
  if (Status d = fs::EnsureRuntimeDir(rp.dir); !d.ok())
    return Fail(d.message());
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Fail(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(p[0]);
    ::setsid();
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) ::dup2(devnull, 0);
    Reporter rep(p[1]);
    ::_exit(Serve(*o, a.metrics, rep, rp.log));
  }
  ::close(p[1]);
  std::string all;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(p[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  if (!RelayReport(all, rp.log, a.quiet)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return 1;
  }
  return 0;
}

// ------------------------------------------- mount(8) helper mode ----
//
// mount(8) runs /sbin/mount.fuse.stripefs (a link to this binary) as
// `mount.fuse.stripefs SOURCE MNT [-sfnv] [-N NS] [-o OPTS]` for
// `mount -t fuse.stripefs` and fstab lines. SOURCE is a volume directory or
// `cluster:NAME` with -o meta=HOST:PORT,key=FILE; it is what /proc/mounts
// shows, so `mount -a` sees the line is mounted. Options only mount(8)
// reads (_netdev, nofail, noauto, x-..., ...) are dropped; the rest are
// `stripefs mount -o` options.

// -o metrics=HOST:PORT (the mount(8) spelling of --metrics).
Status CheckMetricsOption(const std::string& value) {
  Status s = metrics::CheckListenAddress(value);
  if (s.ok()) return s;
  return Status::InvalidArgument(
      "-o metrics=" + value +
      ": give the address to serve /metrics on as metrics=HOST:PORT, e.g. "
      "metrics=127.0.0.1:9571 (port 0 picks a free one)");
}

// mount(8)-only options: the helper ignores them.
bool IsMountCommandOption(const std::string& o) {
  static const char* const kNames[] = {
      "_netdev", "nofail", "auto",  "noauto", "defaults", "user",
      "users",   "nouser", "owner", "group",  "noowner",  "nogroup"};
  for (const char* n : kNames)
    if (o == n) return true;
  return o.rfind("x-", 0) == 0 || o.rfind("comment=", 0) == 0;
}

int RunMountHelper(int argc, char** argv) {
  MountArgs a;
  a.quiet = true;
  bool fake = false;
  std::vector<std::string> opts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-o" && i + 1 < argc) {
      opts.push_back(argv[++i]);
    } else if ((arg == "-N" || arg == "-t") && i + 1 < argc) {
      ++i;  // namespace (mount(8) already entered it) / our own type
    } else if (arg.size() > 1 && arg[0] == '-') {
      for (char c : arg.substr(1)) {
        if (c == 'f') fake = true;  // -s (sloppy), -n, -v: nothing to do
      }
    } else {
      a.positional.push_back(arg);
    }
  }
  if (a.positional.size() != 2) {
    return Fail(
        "usage: mount -t fuse.stripefs SOURCE MNT -o OPTS (SOURCE: a "
        "volume directory, or cluster:NAME with -o meta=HOST:PORT,key=FILE)");
  }
  a.fsname = a.positional[0];
  for (const std::string& o : SplitOptionLists(opts)) {
    if (o.rfind("meta=", 0) == 0) {
      a.meta_address = o.substr(5);
    } else if (o.rfind("key=", 0) == 0) {
      a.key_file = o.substr(4);
    } else if (o.rfind("metrics=", 0) == 0) {
      a.metrics = o.substr(8);
      if (Status s = CheckMetricsOption(a.metrics); !s.ok())
        return Fail(s.message());
    } else if (!o.empty() && !IsMountCommandOption(o)) {
      a.options.push_back(o);
    }
  }
  const bool cluster = a.fsname.rfind("cluster:", 0) == 0;
  if (cluster != !a.meta_address.empty()) {
    return Fail(cluster
                    ? "source " + a.fsname + " needs -o meta=HOST:PORT,key=FILE"
                    : "-o meta= is for a cluster: give the source as "
                      "cluster:NAME");
  }
  if (cluster) a.positional.erase(a.positional.begin());
  if (fake) return 0;
  return RunMount(a);
}

// -------------------------------------------------------------- umount ----

int RunUmount(std::string mnt, bool lazy, int wait_s) {
  char abs[PATH_MAX];
  if (::realpath(mnt.c_str(), abs)) mnt = abs;
  pid_t pid = 0;
  for (const auto& rp : fs::RuntimePathCandidates(mnt)) {
    std::ifstream f(rp.pidfile);
    long v = 0;
    if (f >> v && v > 0) {
      pid = static_cast<pid_t>(v);
      break;
    }
  }
  if (!fuse::IsFuseMountPoint(mnt)) {
    return Fail(mnt + " is not a FUSE mount (nothing to unmount)");
  }
  Status st = fuse::UnmountPath(mnt, lazy);
  if (!st.ok()) {
    if (st.code() == EBUSY) {
      return Fail(mnt +
                  " is busy: close the files and leave the directories "
                  "under it (see `fuser -vm " +
                  mnt + "`), or use `stripefs umount --lazy " + mnt + "`");
    }
    return Fail("unmounting " + mnt + ": " + st.ToString());
  }
  // The daemon writes what it still buffers and closes the volume; wait
  // for it so the volume can be mounted again right away.
  if (pid > 0) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
    while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (::kill(pid, 0) == 0) {
      std::fprintf(
          stderr,
          "stripefs: unmounted %s, but daemon %d is still running after %d s\n",
          mnt.c_str(), static_cast<int>(pid), wait_s);
      return 1;
    }
  }
  std::printf("unmounted %s\n", mnt.c_str());
  return 0;
}

// `stripefs mkfs DIR`.
void AddMkfsCommand(CLI::App& app) {
  auto* c =
      app.add_subcommand("mkfs", "create an embedded stripefs volume in DIR");
  static std::string dir;
  static GeometryFlags g;
  c->add_option("DIR", dir, "volume directory (empty or absent)")->required();
  AddGeometryFlags(c, &g);
  c->callback([] { ExitWith(RunMkfs(dir, g)); });
}

// `stripefs mount`: what to mount, where and how (mode, geometry,
// transport choice, -o options).
void AddMountTargetFlags(CLI::App* c, MountArgs* a) {
  const auto on_off = CLI::IsMember({"on", "off"});
  c->add_option("DIR_MNT", a->positional, "DIR MNT, or MNT with --meta")
      ->required();
  c->add_option("--meta", a->meta_address,
                "metadata service HOST:PORT (cluster mode)");
  c->add_option("--key", a->key_file, "cluster key file (cluster mode)");
  AddGeometryFlags(c, &a->geometry);
  c->add_flag("--foreground,-f", a->foreground,
              "stay in the foreground (log to stderr)");
  c->add_option("--coalesce", a->coalesce,
                "stripe coalescing: on (default) | off")
      ->check(on_off);
  c->add_option("--transport", a->transport, "auto (default) | dev | uring")
      ->check(CLI::IsMember({"auto", "dev", "uring"}));
  c->add_option("--max-ratio", a->max_ratio,
                "set the mount's bdi max_ratio once mounted (root)")
      ->check(InRange(fs::kMaxRatioRange));
  c->add_option(
       "-o", a->options,
       "mount options, comma separated, before or after DIR MNT. As root "
       "the mount is multi-user: allow_other with default_permissions "
       "(the kernel checks modes and POSIX ACLs); no_allow_other keeps it "
       "to the mounting user. Also ro, rw, auto_unmount, "
       "no_default_permissions (no ACLs either) and the VFS options atime, "
       "noatime, relatime, strictatime, nodiratime, diratime, lazytime, "
       "sync, async, dirsync, nosuid, suid, nodev, dev, noexec, exec")
      ->allow_extra_args(false);  // one value per -o
}

// `stripefs mount`: the kernel's caching of names and attributes, and the
// buffering of partial stripes.
void AddMountCacheFlags(CLI::App* c, MountArgs* a) {
  const auto on_off = CLI::IsMember({"on", "off"});
  c->add_option(
       "--idle-flush-ms", a->idle_flush_ms,
       "write buffered partial stripes after this idle time (default 2000)")
      ->check(InRange(fs::kIdleFlushMsRange));
  c->add_option("--frontier-hold-ms", a->frontier_hold_ms,
                "but give the partial stripe at a file's write frontier this "
                "long to be completed by its writer (default 30000)")
      ->check(InRange(fs::kFrontierHoldMsRange));
  c->add_option("--entry-timeout-ms", a->entry_timeout_ms,
                "how long the kernel keeps a name without asking again "
                "(LOOKUP); another client's unlink or rename of it shows "
                "here after at most this (default 1000)")
      ->check(InRange(fs::kEntryTimeoutMsRange));
  c->add_option("--attr-timeout-ms", a->attr_timeout_ms,
                "how long the kernel keeps a file's attributes (size, "
                "times) without asking again (GETATTR) (default 1000)")
      ->check(InRange(fs::kAttrTimeoutMsRange));
  c->add_option("--compound", a->compound,
                "compound requests (kernels with the stripefs series): on "
                "(default: OPEN+GETATTR in one round trip) | off (not "
                "offered to the kernel) | enosys (offered, then refused: "
                "the kernel falls back; for tests)")
      ->check(CLI::IsMember({"on", "off", "enosys"}));
  c->add_option("--memory-cap-mib", a->memory_cap_mib,
                "total stripe buffer memory before the oldest are written "
                "(default 256)")
      ->check(InRange(fs::kMemoryCapMibRange));
  c->add_option("--writeback-cache", a->writeback_cache, "on (default) | off")
      ->check(on_off);
}

// `stripefs mount`: the /dev/fuse and io-uring transports' threads.
void AddMountTransportFlags(CLI::App* c, MountArgs* a) {
  const auto on_off = CLI::IsMember({"on", "off"});
  c->add_option("--dev-wait", a->dev_wait,
                "/dev/fuse workers: read (default: blocking reads, one "
                "wake-up per request) | poll (the old loop, every idle "
                "worker wakes per request; for A/B)")
      ->check(CLI::IsMember({"read", "poll"}));
  c->add_option("--dev-threads", a->dev_threads,
                "/dev/fuse worker threads (default 4)")
      ->check(InRange(fs::kDevThreadsRange));
  c->add_option("--uring-read-workers", a->uring_read_workers,
                "io-uring transport: threads serving READs, shared by all "
                "queues; 0 = on the queue thread (default 4)")
      ->check(InRange(fs::kUringReadWorkersRange));
  c->add_option("--uring-queues", a->uring_queues,
                "io-uring transport: queues to register, on CPUs 0..N-1 "
                "(default: one per CPU). Fewer than the CPUs needs a kernel "
                "that offers FUSE_URING_REDUCED_Q (stripefs fuse.ko patch "
                "7); on others it is ignored (logged): one per CPU")
      ->check(InRange(fs::kUringQueuesRange));
  c->add_option("--uring-lone-reads", a->uring_lone_reads,
                "io-uring transport: a READ that arrives alone on an idle "
                "queue is served on the queue thread: inline (default, one "
                "wake-up less per QD1 read; other requests of that CPU "
                "wait for it) | workers (every READ handed over)")
      ->check(CLI::IsMember({"inline", "workers"}));
  c->add_option("--uring-try-reads", a->uring_try_reads,
                "io-uring transport: a READ for the workers is first tried "
                "on the queue thread and served there when it needs no "
                "waiting (cached map and stripes, page cache): on "
                "(default) | off (every such READ handed over)")
      ->check(on_off);
  c->add_flag("--no-align", a->no_align, "do not request opt-alignment");
}

// `stripefs mount`: writes near full, writes in flight, metadata holds,
// metrics.
void AddMountWriteFlags(CLI::App* c, MountArgs* a) {
  c->add_option("--degraded-writes", a->degraded_writes,
                "near full, a stripe whose chunk writes the stores refuse "
                "for space (up to m of them): allow (default: commit it "
                "degraded; counted, HEALTH_WARN in status, repaired in the "
                "background once space returns) | refuse (the write fails "
                "ENOSPC, old data kept). Also -o degraded_writes=...")
      ->check(CLI::IsMember({"allow", "refuse"}));
  c->add_option("--meta-hold-s", a->meta_hold_s,
                "cluster mode: seconds metadata calls wait for an "
                "unreachable metad before failing with EIO (default 60)")
      ->check(InRange(fs::kMetaHoldSRange));
  c->add_option("--send-window", a->send_window,
                "stripe writes in flight per mount, each holding one "
                "stripe buffer; 0 = write inside each WRITE (default: "
                "32 MiB of stripes, 16 to 64)")
      ->check(InRange(fs::kSendWindowRange));
  c->add_option("--file-send-window", a->file_send_window,
                "stripe writes in flight per file (default: half the "
                "mount's, at least 8)")
      ->check(InRange(fs::kFileSendWindowRange));
  c->add_flag("--enable-uring", a->enable_uring,
              "set /sys/module/fuse/parameters/enable_uring=Y while mounted "
              "(root), so --transport auto|uring can use io-uring");
  c->add_option("--metrics", a->metrics,
                "serve Prometheus metrics on HOST:PORT (/metrics)");
}

// `stripefs mount`: its flags, then RunMount.
void AddMountCommand(CLI::App& app) {
  auto* c = app.add_subcommand(
      "mount",
      "mount a volume: `stripefs mount DIR MNT` (embedded, DIR created if "
      "empty) or "
      "`stripefs mount --meta HOST:PORT --key FILE MNT` (cluster)");
  static MountArgs a;
  AddMountTargetFlags(c, &a);
  AddMountCacheFlags(c, &a);
  AddMountTransportFlags(c, &a);
  AddMountWriteFlags(c, &a);
  c->callback([] { ExitWith(RunMount(a)); });
}

// `stripefs umount MNT`.
void AddUmountCommand(CLI::App& app) {
  auto* c = app.add_subcommand(
      "umount", "unmount a stripefs mount and wait for its daemon");
  static std::string mnt;
  static bool lazy = false;
  static int wait_s = 120;
  c->add_option("MNT", mnt, "mountpoint")->required();
  c->add_flag("--lazy,-l", lazy, "detach now even if busy (umount -l)");
  c->add_option("--wait", wait_s,
                "seconds to wait for the daemon to finish (default 120)")
      ->check(InRange(kTimeoutSecondsRange));
  c->callback([] { ExitWith(RunUmount(mnt, lazy, wait_s)); });
}

const CommandRegistration kRegister([](CLI::App& app) {
  AddMkfsCommand(app);
  AddMountCommand(app);
  AddUmountCommand(app);
});

}  // namespace

bool IsMountHelperName(const char* argv0) {
  const char* base = std::strrchr(argv0, '/');
  return std::strcmp(base ? base + 1 : argv0, kMountHelperName) == 0;
}

int MountHelperMain(int argc, char** argv) {
  return RunMountHelper(argc, argv);
}

}  // namespace stripefs::tools

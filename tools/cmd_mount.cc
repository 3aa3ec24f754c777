// `stripefs mkfs DIR`, `stripefs mount DIR MNT`, `stripefs umount MNT`:
// create an embedded volume, serve it through our FUSE engine (StripeFs),
// unmount it. See docs/filesystem.md.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
#include "fuse-server/fs/stats_socket.h"
#include "fuse-server/fs/stripe_fs.h"
#include "fuse-server/fuse_mount.h"
#include "fuse-server/kernel_knobs.h"
#include "fuse-server/session.h"
#include "tools/command.h"

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

std::string Human(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0)
    std::snprintf(buf, sizeof(buf), "%llu GiB", (unsigned long long)(b >> 30));
  else if (b >= (1ull << 20) && b % (1ull << 20) == 0)
    std::snprintf(buf, sizeof(buf), "%llu MiB", (unsigned long long)(b >> 20));
  else if (b >= 1024 && b % 1024 == 0)
    std::snprintf(buf, sizeof(buf), "%llu KiB", (unsigned long long)(b >> 10));
  else
    std::snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)b);
  return buf;
}

struct GeometryFlags {
  uint32_t k = 4, m = 2;
  std::string cell = "256K";
  bool k_set = false, m_set = false, cell_set = false;
};

void AddGeometryFlags(CLI::App* c, GeometryFlags* g) {
  c->add_option("--k", g->k, "data chunks per stripe (default 4)")
      ->each([g](const std::string&) { g->k_set = true; });
  c->add_option("--m", g->m, "parity chunks per stripe (default 2)")
      ->each([g](const std::string&) { g->m_set = true; });
  c->add_option("--cell-size", g->cell,
                "bytes per chunk, e.g. 256K (default), 1M")
      ->each([g](const std::string&) { g->cell_set = true; });
}

Result<Geometry> ToGeometry(const GeometryFlags& f) {
  auto cell = ParseBytes(f.cell);
  if (!cell || *cell == 0 || *cell % 4096 != 0 || *cell > (64u << 20)) {
    return Status::InvalidArgument(
        "--cell-size '" + f.cell +
        "': give a multiple of 4K up to 64M, e.g. 256K");
  }
  if (f.k < 1 || f.m < 1 || f.k + f.m > 32) {
    return Status::InvalidArgument("--k/--m: need k >= 1, m >= 1, k + m <= 32");
  }
  Geometry g;
  g.k = f.k;
  g.m = f.m;
  g.cell_size = static_cast<uint32_t>(*cell);
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
  o.geometry = *g;
  o.root_uid = ::getuid();
  o.root_gid = ::getgid();
  auto v = Volume::OpenEmbedded(dir, o);
  if (!v.ok()) return Fail("mkfs " + dir + ": " + v.status().ToString());
  std::printf("created stripefs volume in %s: %u+%u, cell %s, stripe %s\n",
              dir.c_str(), g->k, g->m, Human(g->cell_size).c_str(),
              Human(g->stripe_size()).c_str());
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
  int max_ratio = -1;
  std::vector<std::string> options;  // -o
  uint64_t idle_flush_ms = 2000;
  uint64_t frontier_hold_ms = 30000;
  uint64_t memory_cap_mib = 256;
  std::string writeback_cache = "on";
  int dev_threads = 4;
  bool no_align = false;
  bool enable_uring = false;
  int meta_hold_s = 60;
  int send_window = 16;
  int file_send_window = 8;
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

Status CheckMountpoint(const std::string& mnt) {
  struct stat st {};
  if (::stat(mnt.c_str(), &st) != 0) {
    if (errno == ENOTCONN) {
      return Status(ENOTCONN,
                    mnt +
                        " is a dead FUSE mount (its daemon died): run "
                        "`stripefs umount --lazy " +
                        mnt + "` first");
    }
    return Status(errno, "mountpoint " + mnt + ": " + std::strerror(errno) +
                             " (create it with `mkdir -p " + mnt + "`)");
  }
  if (!S_ISDIR(st.st_mode))
    return Status(ENOTDIR, "mountpoint " + mnt + " is not a directory");
  if (fuse::IsFuseMountPoint(mnt)) {
    return Status(
        EBUSY,
        mnt + " is already a FUSE mount: unmount it with `stripefs umount " +
            mnt + "` or pick another mountpoint");
  }
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    return Status(ENODEV,
                  "no usable /dev/fuse (" + std::string(std::strerror(errno)) +
                      "): load the module (`modprobe fuse`) or give the "
                      "container the device (--device /dev/fuse)");
  }
  if (::geteuid() != 0 && ::access("/usr/bin/fusermount3", X_OK) != 0 &&
      ::access("/bin/fusermount3", X_OK) != 0) {
    return Status(EPERM,
                  "not root and fusermount3 is missing: run as root or "
                  "install fuse3 (apt-get install fuse3)");
  }
  return Status::Ok();
}

Result<std::unique_ptr<Volume>> OpenVolume(const MountArgs& a,
                                           const std::string& dir) {
  if (!a.meta_address.empty()) {
    if (a.key_file.empty()) {
      return Status::InvalidArgument(
          "cluster mode needs the cluster key: --key FILE "
          "(the file `stripefs cluster up` wrote)");
    }
    if (a.geometry.k_set || a.geometry.m_set || a.geometry.cell_set) {
      return Status::InvalidArgument(
          "--k/--m/--cell-size apply to embedded volumes only; "
          "a cluster's geometry is fixed by its metad");
    }
    MetaHoldOptions hold;
    hold.hold = std::chrono::seconds(a.meta_hold_s);
    auto v = Volume::ConnectCluster(a.meta_address, a.key_file, {}, &hold);
    if (!v.ok()) return v.status().Annotate("cluster " + a.meta_address);
    return v;
  }
  auto g = ToGeometry(a.geometry);
  if (!g.ok()) return g.status();
  EmbeddedVolumeOptions o;
  o.geometry = *g;
  o.root_uid = ::getuid();
  o.root_gid = ::getgid();
  auto v = Volume::OpenEmbedded(dir, o);
  if (!v.ok()) return v.status().Annotate("volume " + dir);
  const Geometry& have = (*v)->geometry();
  if ((a.geometry.k_set && have.k != g->k) ||
      (a.geometry.m_set && have.m != g->m) ||
      (a.geometry.cell_set && have.cell_size != g->cell_size)) {
    return Status::InvalidArgument(dir + " holds a " + std::to_string(have.k) +
                                   "+" + std::to_string(have.m) +
                                   " volume with " + Human(have.cell_size) +
                                   " cells; the geometry flags differ: drop "
                                   "them (geometry is fixed at mkfs)");
  }
  return v;
}

Status SetBdiMaxRatio(const std::string& mnt, int ratio) {
  struct stat st {};
  if (::stat(mnt.c_str(), &st) != 0)
    return Status::FromErrno(errno, "stat " + mnt);
  const std::string path = "/sys/class/bdi/" +
                           std::to_string(major(st.st_dev)) + ":" +
                           std::to_string(minor(st.st_dev)) + "/max_ratio";
  std::ofstream f(path);
  if (!f) {
    return Status(EACCES, "cannot open " + path + " (needs root): run `echo " +
                              std::to_string(ratio) + " | sudo tee " + path +
                              "`");
  }
  f << ratio << "\n";
  f.flush();
  if (!f)
    return Status::IoError("writing " + std::to_string(ratio) + " to " + path);
  return Status::Ok();
}

sigset_t StopSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGHUP);
  return s;
}

int Serve(const MountArgs& a, const std::string& dir, const std::string& mnt,
          Reporter& rep) {
  // Signals go to one thread (sigwait), so block them before any thread.
  sigset_t stop = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto transport = fuse::ParseTransportChoice(a.transport);
  if (!transport.ok())
    return rep.Error("--transport: " + transport.status().message());

  auto volume = OpenVolume(a, dir);
  if (!volume.ok()) return rep.Error(volume.status().ToString());
  const Geometry geo = (*volume)->geometry();
  const uint64_t S = geo.stripe_size();

  // Requests as large as a stripe need max_pages = S / 4 KiB.
  uint32_t pages = static_cast<uint32_t>(std::min<uint64_t>(S / 4096, 65535));
  std::string pages_note;
  if (pages > 256) {
    std::optional<uint32_t> prev;
    Status st = fuse::EnsureMaxPagesLimit(pages, &prev);
    if (!st.ok()) {
      pages_note = "could not raise max_pages_limit to " +
                   std::to_string(pages) + " (" + st.message() +
                   "); requests stay at 1 MiB, below the " + Human(S) +
                   " stripe: coalescing is what keeps backend writes whole";
      pages = 256;
    } else if (prev) {
      pages_note = "raised /proc/sys/fs/fuse/max_pages_limit from " +
                   std::to_string(*prev) + " to " + std::to_string(pages);
    }
  }
  if (pages < 256) pages = 256;

  // --enable-uring: the kernel offers io-uring at INIT only while the fuse
  // module's enable_uring is Y; set it for the life of this mount.
  std::unique_ptr<fuse::ScopedKnob> uring_knob;
  std::string uring_note;
  if (a.enable_uring) {
    auto knob = fuse::EnableUring();
    if (!knob.ok())
      return rep.Error("--enable-uring: " + knob.status().message());
    uring_knob = std::move(knob).value();
    if (uring_knob) {
      uring_note = std::string(fuse::kEnableUringPath) + ": " +
                   uring_knob->previous() + " -> Y (restored at unmount)";
    }
  }

  fs::StripeFsOptions fo;
  fo.coalesce = a.coalesce != "off";
  fo.idle_flush = std::chrono::milliseconds(a.idle_flush_ms);
  fo.frontier_hold = std::chrono::milliseconds(a.frontier_hold_ms);
  fo.memory_cap = a.memory_cap_mib << 20;
  fo.send_window = static_cast<size_t>(a.send_window);
  fo.file_send_window = static_cast<size_t>(a.file_send_window);
  fo.mountpoint = mnt;
  fs::StripeFs stripefs(volume->get(), fo);

  fuse::SessionOptions so;
  so.transport = *transport;
  so.dev_threads = a.dev_threads;
  so.init.max_pages = pages;
  so.init.max_write = pages * 4096;
  so.init.max_readahead =
      static_cast<uint32_t>(std::min<uint64_t>(S, 1u << 20));
  so.init.writeback_cache = a.writeback_cache != "off";
  if (!a.no_align && (S & (S - 1)) == 0) {
    so.init.align_page_order = static_cast<uint8_t>(__builtin_ctzll(S));
  }
  fuse::MountOptions mo;
  mo.fsname = (*volume)->description();
  for (const auto& opt : a.options) {
    std::string rest;
    size_t start = 0;
    while (start <= opt.size()) {
      size_t comma = opt.find(',', start);
      std::string o =
          opt.substr(start, comma == std::string::npos ? std::string::npos
                                                       : comma - start);
      if (o == "allow_other")
        mo.allow_other = true;
      else if (o == "ro")
        mo.read_only = true;
      else if (o == "no_default_permissions")
        mo.default_permissions = false;
      else if (o == "auto_unmount")
        mo.auto_unmount = true;
      else if (!o.empty())
        rest += (rest.empty() ? "" : ",") + o;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (!rest.empty())
      mo.extra_options += (mo.extra_options.empty() ? "" : ",") + rest;
  }

  fuse::Session session(&stripefs, so);
  stripefs.AttachSession(&session);
  auto mount = fuse::FuseMount::Mount(mnt, mo);
  if (!mount.ok())
    return rep.Error("mounting " + mnt + ": " + mount.status().ToString());
  Status st = session.Start((*mount)->fd());
  if (!st.ok()) return rep.Error("starting the FUSE session: " + st.ToString());
  if (!session.WaitForInit(std::chrono::seconds(10))) {
    session.Stop();
    (void)session.Wait();
    return rep.Error("the kernel did not send FUSE INIT within 10 s on " + mnt);
  }

  std::string ratio_note;
  if (a.max_ratio >= 0) {
    Status rs = SetBdiMaxRatio(mnt, a.max_ratio);
    ratio_note = rs.ok() ? "bdi max_ratio set to " + std::to_string(a.max_ratio)
                         : "could not set bdi max_ratio: " + rs.message();
  }

  const fs::RuntimePaths rp = fs::RuntimePathsFor(mnt);
  auto stats = fs::StatsServer::Start(
      rp.socket, [&stripefs] { return stripefs.StatsJson().dump(); });
  std::string stats_note =
      stats.ok() ? "stripefs stat " + mnt + "  (socket " + rp.socket + ")"
                 : "unavailable: " + stats.status().ToString();
  {
    std::ofstream pf(rp.pidfile);
    pf << ::getpid() << "\n";
  }

  const fuse::NegotiatedInit n = session.negotiated();
  rep.Say("stripefs: mounted " + (*volume)->description() + " at " + mnt +
          " (pid " + std::to_string(::getpid()) + ")");
  rep.Say("  geometry: " + std::to_string(geo.k) + "+" + std::to_string(geo.m) +
          ", cell " + Human(geo.cell_size) + ", stripe " + Human(S));
  rep.Say("  protocol 7." + std::to_string(n.minor) + " (kernel 7." +
          std::to_string(n.kernel_minor) +
          "), transport: " + session.active_transport() +
          (n.uring_offered ? "" : " (kernel did not offer io-uring)"));
  rep.Say("  max_pages: " + std::to_string(n.max_pages) +
          ", max_write: " + Human(n.max_write) +
          ", writeback cache: " + (n.writeback_cache() ? "yes" : "no"));
  if (!pages_note.empty()) rep.Say("  " + pages_note);
  if (!uring_note.empty()) rep.Say("  " + uring_note);
  rep.Say(std::string("  alignment requested: ") +
          (n.align_requested
               ? "yes (" + Human(uint64_t{1} << n.align_page_order) + ")"
               : "no") +
          ", acknowledged by kernel: " + (n.align_acknowledged ? "yes" : "no"));
  rep.Say(std::string("  coalescing: ") +
          (fo.coalesce ? "on (idle flush " + std::to_string(a.idle_flush_ms) +
                             " ms, memory cap " +
                             std::to_string(a.memory_cap_mib) + " MiB)"
                       : "off (every WRITE goes to the backend at once)"));
  if (!ratio_note.empty()) rep.Say("  " + ratio_note);
  rep.Say("  stats: " + stats_note);
  rep.Say("  unmount: stripefs umount " + mnt);
  rep.Close();

  // Clean unmount on SIGINT/SIGTERM/SIGHUP: flush, unmount while still
  // serving (the kernel writes dirty pages back), then the session ends.
  std::atomic<bool> done{false};
  std::thread sig([&] {
    timespec ts{0, 200 * 1000 * 1000};
    while (!done.load()) {
      int s = sigtimedwait(&stop, nullptr, &ts);
      if (s <= 0) continue;
      std::fprintf(stderr, "stripefs: signal %d: unmounting %s\n", s,
                   mnt.c_str());
      (void)stripefs.FlushAll(fs::FlushReason::kDestroy);
      Status us = fuse::UnmountPath(mnt, false);
      if (!us.ok()) {
        std::fprintf(stderr, "stripefs: %s; detaching lazily\n",
                     us.ToString().c_str());
        (void)fuse::UnmountPath(mnt, true);
      }
      session.Stop();
      return;
    }
  });
  Status why = session.Wait();
  done.store(true);
  sig.join();
  if (stats.ok()) (*stats)->Stop();
  Status fl = stripefs.FlushAll(fs::FlushReason::kDestroy);
  if (!fl.ok())
    std::fprintf(stderr, "stripefs: final flush: %s\n", fl.ToString().c_str());
  ::unlink(rp.pidfile.c_str());
  if (!why.ok())
    std::fprintf(stderr, "stripefs: session ended: %s\n",
                 why.ToString().c_str());
  return why.ok() && fl.ok() ? 0 : 1;
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
  if (a.coalesce != "on" && a.coalesce != "off")
    return Fail("--coalesce takes on or off");
  if (a.max_ratio > 100) return Fail("--max-ratio takes 0..100");
  char abs[PATH_MAX];
  if (::realpath(mnt.c_str(), abs)) mnt = abs;
  Status st = CheckMountpoint(mnt);
  if (!st.ok()) return Fail(st.message());
  if (!dir.empty()) {
    std::error_code ec;
    dir = sfs::absolute(dir, ec).lexically_normal().string();
  }

  if (a.foreground) {
    Reporter rep(-1);
    return Serve(a, dir, mnt, rep);
  }
  // Daemon: the child mounts and reports through a pipe; the parent prints
  // the report and exits once the mount is live (or failed).
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return Fail(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Fail(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(p[0]);
    ::setsid();
    const fs::RuntimePaths rp = fs::RuntimePathsFor(mnt);
    std::error_code ec;
    sfs::create_directories(rp.dir, ec);
    int devnull = ::open("/dev/null", O_RDWR);
    int log = ::open(rp.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    Reporter rep(p[1]);
    int rc = Serve(a, dir, mnt, rep);
    rep.Close();
    std::fflush(nullptr);
    ::_exit(rc);
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
  bool failed = all.empty();
  size_t pos = 0;
  while (pos < all.size()) {
    size_t nl = all.find('\n', pos);
    std::string line =
        all.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!line.empty() && line[0] == 'E') {
      std::fprintf(stderr, "stripefs: %s\n", line.c_str() + 1);
      failed = true;
    } else {
      std::printf("%s\n", line.c_str());
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  if (failed) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (all.empty())
      std::fprintf(
          stderr,
          "stripefs: the mount daemon exited without a report (see %s)\n",
          fs::RuntimePathsFor(mnt).log.c_str());
    return 1;
  }
  return 0;
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

const CommandRegistration kRegister([](CLI::App& app) {
  {
    auto* c =
        app.add_subcommand("mkfs", "create an embedded stripefs volume in DIR");
    static std::string dir;
    static GeometryFlags g;
    c->add_option("DIR", dir, "volume directory (empty or absent)")->required();
    AddGeometryFlags(c, &g);
    c->callback([] { ExitWith(RunMkfs(dir, g)); });
  }
  {
    auto* c = app.add_subcommand(
        "mount",
        "mount a volume: `stripefs mount DIR MNT` (embedded, DIR created if "
        "empty) or "
        "`stripefs mount --meta HOST:PORT --key FILE MNT` (cluster)");
    static MountArgs a;
    c->add_option("DIR_MNT", a.positional, "DIR MNT, or MNT with --meta")
        ->required();
    c->add_option("--meta", a.meta_address,
                  "metadata service HOST:PORT (cluster mode)");
    c->add_option("--key", a.key_file, "cluster key file (cluster mode)");
    AddGeometryFlags(c, &a.geometry);
    c->add_flag("--foreground,-f", a.foreground,
                "stay in the foreground (log to stderr)");
    c->add_option("--coalesce", a.coalesce,
                  "stripe coalescing: on (default) | off");
    c->add_option("--transport", a.transport, "auto (default) | dev | uring");
    c->add_option("--max-ratio", a.max_ratio,
                  "set the mount's bdi max_ratio (0..100) once mounted (root)");
    c->add_option("-o", a.options,
                  "mount options: allow_other, ro, auto_unmount, ...");
    c->add_option(
        "--idle-flush-ms", a.idle_flush_ms,
        "write buffered partial stripes after this idle time (default 2000)");
    c->add_option("--frontier-hold-ms", a.frontier_hold_ms,
                  "but give the partial stripe at a file's write frontier this "
                  "long to be completed by its writer (default 30000)");
    c->add_option("--memory-cap-mib", a.memory_cap_mib,
                  "total stripe buffer memory before the oldest are written "
                  "(default 256)");
    c->add_option("--writeback-cache", a.writeback_cache, "on (default) | off");
    c->add_option("--dev-threads", a.dev_threads,
                  "/dev/fuse worker threads (default 4)");
    c->add_flag("--no-align", a.no_align, "do not request opt-alignment");
    c->add_option("--meta-hold-s", a.meta_hold_s,
                  "cluster mode: seconds metadata calls wait for an "
                  "unreachable metad before failing with EIO (default 60)")
        ->check(CLI::Range(0, 3600));
    c->add_option("--send-window", a.send_window,
                  "stripe writes in flight per mount, each holding one "
                  "stripe buffer; 0 = write inside each WRITE (default 16)")
        ->check(CLI::Range(0, 256));
    c->add_option("--file-send-window", a.file_send_window,
                  "stripe writes in flight per file (default 8)")
        ->check(CLI::Range(1, 256));
    c->add_flag("--enable-uring", a.enable_uring,
                "set /sys/module/fuse/parameters/enable_uring=Y while mounted "
                "(root), so --transport auto|uring can use io-uring");
    c->callback([] { ExitWith(RunMount(a)); });
  }
  {
    auto* c = app.add_subcommand(
        "umount", "unmount a stripefs mount and wait for its daemon");
    static std::string mnt;
    static bool lazy = false;
    static int wait_s = 120;
    c->add_option("MNT", mnt, "mountpoint")->required();
    c->add_flag("--lazy,-l", lazy, "detach now even if busy (umount -l)");
    c->add_option("--wait", wait_s,
                  "seconds to wait for the daemon to finish (default 120)");
    c->callback([] { ExitWith(RunUmount(mnt, lazy, wait_s)); });
  }
});

}  // namespace
}  // namespace stripefs::tools

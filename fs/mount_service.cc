#include "fs/mount_service.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/human_bytes.h"
#include "common/option_list.h"
#include "common/unique_fd.h"
#include "fs/stats_socket.h"
#include "fuse/fuse_mount.h"
#include "fuse/kernel_knobs.h"
#include "fuse/uring_transport.h"

namespace stripefs::fs {
namespace {

namespace sfs = std::filesystem;

constexpr uint32_t kPageBytes = 4096;
constexpr uint32_t kDefaultMaxPages = 256;  // the kernel's default limit
constexpr uint32_t kMaxMaxPages = 65535;    // FUSE's max_pages field
constexpr auto kInitTimeout = std::chrono::seconds(10);

Status OutOfRange(const std::string& option, int64_t v, OptionRange r) {
  return Status::InvalidArgument(option + " " + std::to_string(v) +
                                 " is out of range: give a value in " +
                                 r.ToString());
}

Status CheckMountpoint(const std::string& mnt) {
  struct stat st {};
  if (::stat(mnt.c_str(), &st) != 0) {
    if (errno == ENOTCONN) {
      return Status(ENOTCONN, mnt +
                                  " is a dead FUSE mount (its daemon died): "
                                  "run `stripefs umount --lazy " +
                                  mnt + "` first");
    }
    return Status(errno, "mountpoint " + mnt + ": " + std::strerror(errno) +
                             " (create it with `mkdir -p " + mnt + "`)");
  }
  if (!S_ISDIR(st.st_mode))
    return Status(ENOTDIR, "mountpoint " + mnt + " is not a directory");
  if (fuse::IsFuseMountPoint(mnt)) {
    return Status(EBUSY, mnt +
                             " is already a FUSE mount: unmount it with "
                             "`stripefs umount " +
                             mnt + "` or pick another mountpoint");
  }
  // A missing device is refused; its mode is not: whether this user may
  // open it (directly, or through fusermount3) the mount path says.
  if (::access("/dev/fuse", F_OK) != 0) {
    return Status(ENODEV,
                  "no /dev/fuse (" + std::string(std::strerror(errno)) +
                      "): load the module (`modprobe fuse`) or give the "
                      "container the device (--device /dev/fuse)");
  }
  if (::geteuid() != 0 && ::access("/dev/fuse", R_OK | W_OK) != 0 &&
      ::access("/usr/bin/fusermount3", X_OK) != 0 &&
      ::access("/bin/fusermount3", X_OK) != 0) {
    return Status(EPERM,
                  "not root, /dev/fuse is not open to you and fusermount3 is "
                  "missing: run as root or install fuse3 (apt-get install "
                  "fuse3)");
  }
  return Status::Ok();
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

// A standard VFS mount option (mount(8)). libfuse 3.14 takes some itself;
// the others it rejects, so they are set on the mount once it exists.
struct VfsOption {
  const char* name;
  bool to_libfuse;
  uint64_t attr_set = 0, attr_clr = 0;  // mount_setattr(2) MOUNT_ATTR_*
  bool lazytime = false;                // superblock flag
};
constexpr VfsOption kVfsOptions[] = {
    {"ro", true},
    {"rw", true},
    {"nosuid", true},
    {"suid", true},
    {"nodev", true},
    {"dev", true},
    {"noexec", true},
    {"exec", true},
    {"sync", true},
    {"async", true},
    {"dirsync", true},
    {"noatime", true},
    {"atime", true},
    {"relatime", false, MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME},
    {"strictatime", false, MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME},
    {"nodiratime", false, MOUNT_ATTR_NODIRATIME, 0},
    {"diratime", false, 0, MOUNT_ATTR_NODIRATIME},
    {"lazytime", false, 0, 0, true},
};

// What libfuse cannot set, to set on the mount once it exists.
struct MountAttrs {
  uint64_t set = 0, clr = 0;
  bool lazytime = false;
  std::string names;  // "strictatime,lazytime"
  void Add(const VfsOption& v);
};

void MountAttrs::Add(const VfsOption& v) {
  // The last atime option wins, as with mount(8).
  if (v.attr_clr & MOUNT_ATTR__ATIME) set &= ~uint64_t{MOUNT_ATTR__ATIME};
  set = (set & ~v.attr_clr) | v.attr_set;
  clr = (clr & ~v.attr_set) | v.attr_clr;
  lazytime |= v.lazytime;
  names += (names.empty() ? "" : ",") + std::string(v.name);
}

const VfsOption* FindVfsOption(const std::string& name) {
  for (const auto& v : kVfsOptions)
    if (name == v.name) return &v;
  return nullptr;
}

// The embedded volume's namespace sync delay: none when -o sync or
// -o dirsync asks for synchronous directory changes.
std::chrono::milliseconds NamespaceSyncDelay(const MountServiceOptions& so) {
  for (const std::string& o : SplitOptionLists(so.mount_options))
    if (o == "sync" || o == "dirsync") return std::chrono::milliseconds(0);
  return so.namespace_sync;
}

// The -o values: our own options, the VFS ones, and the rest for libfuse.
Status ParseMountOptions(const MountServiceOptions& so, fuse::MountOptions* mo,
                         MountAttrs* after_mount) {
  // Multi-user by default when root mounts: the kernel checks permissions
  // (default_permissions), so allow_other is safe.
  mo->allow_other = ::geteuid() == 0;
  for (const std::string& o : SplitOptionLists(so.mount_options)) {
    const VfsOption* vfs = FindVfsOption(o);
    if (o == "ro" || o == "rw") {
      mo->read_only = o == "ro";
    } else if (vfs && vfs->to_libfuse) {
      mo->extra_options += (mo->extra_options.empty() ? "" : ",") + o;
    } else if (vfs) {
      after_mount->Add(*vfs);
    } else if (o == "allow_other") {
      mo->allow_other = true;
    } else if (o == "no_allow_other") {
      mo->allow_other = false;
    } else if (o == "default_permissions") {
      mo->default_permissions = true;
    } else if (o == "no_default_permissions") {
      mo->default_permissions = false;
    } else if (o == "auto_unmount") {
      mo->auto_unmount = true;
    } else if (o.rfind("fsname=", 0) == 0 || o.rfind("subtype=", 0) == 0) {
      return Status::InvalidArgument("-o " + o +
                                     ": stripefs sets fsname and subtype "
                                     "itself; drop it");
    } else if (!o.empty()) {
      mo->extra_options += (mo->extra_options.empty() ? "" : ",") + o;
    }
  }
  if (::geteuid() != 0) {
    // relatime is what a FUSE mount gets anyway; the others need root.
    if (after_mount->names == "relatime") *after_mount = MountAttrs{};
    if (!after_mount->names.empty()) {
      return Status(EPERM, "-o " + after_mount->names +
                               ": only root can set these on a FUSE mount "
                               "(fusermount3 does not take them); drop them");
    }
  }
  return Status::Ok();
}

// Sets what libfuse could not on the new mount: per-mount atime flags
// (mount_setattr) and lazytime (a superblock flag: fspick + reconfigure).
Status ApplyMountAttrs(const std::string& mnt, const MountAttrs& a) {
  if (a.set != 0 || a.clr != 0) {
    struct mount_attr attr {};
    attr.attr_set = a.set;
    attr.attr_clr = a.clr;
    if (::mount_setattr(AT_FDCWD, mnt.c_str(), 0, &attr, sizeof(attr)) != 0)
      return Status::FromErrno(errno, "-o " + a.names + ": mount_setattr");
  }
  if (a.lazytime) {
    UniqueFd fd(::fspick(AT_FDCWD, mnt.c_str(), FSPICK_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno(errno, "-o lazytime: fspick");
    if (::fsconfig(fd.get(), FSCONFIG_SET_FLAG, "lazytime", nullptr, 0) != 0 ||
        ::fsconfig(fd.get(), FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) !=
            0) {
      return Status::FromErrno(errno, "-o lazytime: reconfiguring the mount");
    }
  }
  return Status::Ok();
}

bool IsEmptyDir(const std::string& dir) {
  std::error_code ec;
  return sfs::is_directory(dir, ec) && sfs::is_empty(dir, ec) && !ec;
}

}  // namespace

std::string CorruptMetadataFix(const std::string& meta_dir) {
  return "The metadata store is damaged: restore " + meta_dir +
         " from a backup, or salvage it with `stripefs meta-repair " +
         meta_dir +
         "` (RocksDB repair; the newest mutations may be lost), then run "
         "`stripefs scrub` on the volume";
}

std::string OptionRange::ToString() const {
  return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

Geometry GeometryChoice::Resolve() const {
  Geometry g;
  if (k) g.k = *k;
  if (m) g.m = *m;
  if (cell_size) g.cell_size = *cell_size;
  return g;
}

Status ValidateGeometryChoice(const GeometryChoice& c) {
  const Geometry g = c.Resolve();
  if (!kDataChunksRange.Contains(g.k))
    return OutOfRange("--k", g.k, kDataChunksRange);
  if (!kParityChunksRange.Contains(g.m))
    return OutOfRange("--m", g.m, kParityChunksRange);
  if (g.k + g.m > kMaxStripeWidth) {
    return Status::InvalidArgument(
        "--k " + std::to_string(g.k) + " --m " + std::to_string(g.m) +
        ": k + m must be at most " + std::to_string(kMaxStripeWidth));
  }
  if (!kCellSizeRange.Contains(g.cell_size) || g.cell_size % 4096 != 0) {
    return Status::InvalidArgument(
        "--cell-size " + std::to_string(g.cell_size) +
        ": give a multiple of 4K in [4K, 64M], e.g. 256K");
  }
  return Status::Ok();
}

// allow_other without default_permissions would let every local user read
// and write every file: stripefs checks no permissions itself (the kernel
// does, with default_permissions), so that pair is refused.
Status CheckAccessControl(const std::vector<std::string>& options) {
  bool allow_other = ::geteuid() == 0;  // ParseMountOptions' default
  bool default_permissions = true;
  for (const std::string& o : SplitOptionLists(options)) {
    if (o == "allow_other") allow_other = true;
    if (o == "no_allow_other") allow_other = false;
    if (o == "default_permissions") default_permissions = true;
    if (o == "no_default_permissions") default_permissions = false;
  }
  if (allow_other && !default_permissions)
    return Status::InvalidArgument(
        "-o no_default_permissions with allow_other (the default for root) "
        "would let every local user read and write every file (stripefs "
        "checks no permissions itself): add -o no_allow_other, or keep "
        "default_permissions");
  return Status::Ok();
}

Status ValidateMountOptions(const MountServiceOptions& o) {
  if (o.mountpoint.empty() || o.mountpoint[0] != '/')
    return Status::InvalidArgument("the mountpoint must be an absolute path");
  STRIPEFS_RETURN_IF_ERROR(CheckAccessControl(o.mount_options));
  if (!kDevThreadsRange.Contains(o.dev_threads))
    return OutOfRange("--dev-threads", o.dev_threads, kDevThreadsRange);
  if (!kUringReadWorkersRange.Contains(o.uring_read_workers))
    return OutOfRange("--uring-read-workers", o.uring_read_workers,
                      kUringReadWorkersRange);
  if (o.uring_queues != 0) {
    const int cpus = fuse::PossibleCpuCount();
    const OptionRange queues{1, std::min<int64_t>(cpus, kUringQueuesRange.max)};
    if (!queues.Contains(o.uring_queues)) {
      return Status::InvalidArgument(
          "--uring-queues " + std::to_string(o.uring_queues) +
          " is out of range: give a value in " + queues.ToString() +
          " (this machine has " + std::to_string(cpus) +
          " possible CPUs), or leave it out for one queue per CPU");
    }
  }
  if (!kIdleFlushMsRange.Contains(o.fs.idle_flush.count()))
    return OutOfRange("--idle-flush-ms", o.fs.idle_flush.count(),
                      kIdleFlushMsRange);
  if (!kFrontierHoldMsRange.Contains(o.fs.frontier_hold.count()))
    return OutOfRange("--frontier-hold-ms", o.fs.frontier_hold.count(),
                      kFrontierHoldMsRange);
  if (!kEntryTimeoutMsRange.Contains(o.fs.entry_timeout.count()))
    return OutOfRange("--entry-timeout-ms", o.fs.entry_timeout.count(),
                      kEntryTimeoutMsRange);
  const uint64_t cap_max = uint64_t(kMemoryCapMibRange.max) << 20;
  if (o.fs.memory_cap == 0 || o.fs.memory_cap > cap_max) {
    return OutOfRange("--memory-cap-mib",
                      static_cast<int64_t>(o.fs.memory_cap >> 20),
                      kMemoryCapMibRange);
  }
  if (o.max_ratio != -1 && !kMaxRatioRange.Contains(o.max_ratio))
    return OutOfRange("--max-ratio", o.max_ratio, kMaxRatioRange);
  if (!kMetaHoldSRange.Contains(o.meta_hold_s))
    return OutOfRange("--meta-hold-s", o.meta_hold_s, kMetaHoldSRange);
  constexpr size_t kAuto = StripeFsOptions::kWindowFromStripeSize;
  if (o.fs.send_window != kAuto &&
      !kSendWindowRange.Contains(static_cast<int64_t>(o.fs.send_window)))
    return OutOfRange("--send-window", static_cast<int64_t>(o.fs.send_window),
                      kSendWindowRange);
  if (o.fs.file_send_window != kAuto &&
      !kFileSendWindowRange.Contains(
          static_cast<int64_t>(o.fs.file_send_window))) {
    return OutOfRange("--file-send-window",
                      static_cast<int64_t>(o.fs.file_send_window),
                      kFileSendWindowRange);
  }
  if (!o.meta_address.empty()) {
    if (!o.volume_dir.empty()) {
      return Status::InvalidArgument(
          "give either a volume directory or --meta, not both");
    }
    if (o.key_file.empty()) {
      return Status::InvalidArgument(
          "cluster mode needs the cluster key: --key FILE "
          "(the file `stripefs cluster up` wrote)");
    }
    if (o.geometry.any()) {
      return Status::InvalidArgument(
          "--k/--m/--cell-size apply to embedded volumes only; "
          "a cluster's geometry is fixed by its metad");
    }
    return Status::Ok();
  }
  if (o.volume_dir.empty() || o.volume_dir[0] != '/')
    return Status::InvalidArgument("the volume directory must be absolute");
  return ValidateGeometryChoice(o.geometry);
}

MountService::MountService(MountServiceOptions o) : o_(std::move(o)) {}

MountService::~MountService() { (void)Stop(); }

Result<std::unique_ptr<MountService>> MountService::Start(
    MountServiceOptions o) {
  STRIPEFS_RETURN_IF_ERROR(ValidateMountOptions(o));
  STRIPEFS_RETURN_IF_ERROR(CheckMountpoint(o.mountpoint));
  o.fs.mountpoint = o.mountpoint;
  std::unique_ptr<MountService> s(new MountService(std::move(o)));
  Status st = s->Up();
  if (!st.ok()) {
    (void)s->Stop();
    s->RemoveCreatedVolume();
    return st;
  }
  return s;
}

// How long a mount waits for a volume that an exiting daemon still holds.
constexpr int kBusyVolumeWaitMs = 10000;
constexpr int kBusyVolumeRetryMs = 100;

Status MountService::OpenVolume() {
  if (!o_.meta_address.empty()) {
    MetaHoldOptions hold;
    hold.hold = std::chrono::seconds(o_.meta_hold_s);
    StripeClientOptions co;
    co.secure_wire = o_.secure_wire;
    co.refuse_degraded_enospc = o_.refuse_degraded_writes;
    auto v = Volume::ConnectCluster(o_.meta_address, o_.key_file, co, &hold);
    if (!v.ok()) return v.status().Annotate("cluster " + o_.meta_address);
    volume_ = std::move(v).value();
    return Status::Ok();
  }
  const std::string& dir = o_.volume_dir;
  std::error_code ec;
  created_volume_dir_ = !sfs::exists(dir, ec);
  created_volume_ = created_volume_dir_ || IsEmptyDir(dir);
  const Geometry want = o_.geometry.Resolve();
  EmbeddedVolumeOptions vo;
  vo.geometry = want;
  vo.root_uid = o_.root_uid;
  vo.root_gid = o_.root_gid;
  vo.client.refuse_degraded_enospc = o_.refuse_degraded_writes;
  vo.namespace_sync_delay = NamespaceSyncDelay(o_);
  auto v = Volume::OpenEmbedded(dir, vo);
  // umount(8) returns once the kernel lets go, while the previous daemon may
  // still be closing the volume: `umount; mount` must work, so a busy volume
  // that no mount shows is waited for, boundedly. One that is mounted is
  // refused at once, naming where.
  for (int waited_ms = 0; !v.ok() && v.status().code() == EBUSY;
       waited_ms += kBusyVolumeRetryMs) {
    if (auto mnt = fuse::FuseMountOfSource(Volume::EmbeddedDescription(dir))) {
      return Status(EBUSY, "volume " + dir + " is already mounted at " + *mnt +
                               "; unmount it first (stripefs umount " + *mnt +
                               ")");
    }
    if (waited_ms >= kBusyVolumeWaitMs) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kBusyVolumeRetryMs));
    v = Volume::OpenEmbedded(dir, vo);
  }
  if (!v.ok()) {
    if (v.status().code() == EBADMSG) {
      return Status(EBADMSG, "volume " + dir + ": " + v.status().message() +
                                 ". " + CorruptMetadataFix(dir + "/meta"));
    }
    return v.status().Annotate("volume " + dir);
  }
  volume_ = std::move(v).value();
  const Geometry& have = volume_->geometry();
  const GeometryChoice& g = o_.geometry;
  if ((g.k && have.k != *g.k) || (g.m && have.m != *g.m) ||
      (g.cell_size && have.cell_size != *g.cell_size)) {
    return Status::InvalidArgument(
        dir + " holds a " + std::to_string(have.k) + "+" +
        std::to_string(have.m) + " volume with " + HumanBytes(have.cell_size) +
        " cells; the geometry flags differ: drop them (geometry is fixed at "
        "mkfs)");
  }
  return Status::Ok();
}

void MountService::DeriveFuseOptions(fuse::SessionOptions* so) {
  const uint64_t S = volume_->geometry().stripe_size();
  // Requests as large as a stripe need max_pages = S / 4 KiB.
  uint32_t pages =
      static_cast<uint32_t>(std::min<uint64_t>(S / kPageBytes, kMaxMaxPages));
  if (pages > kDefaultMaxPages) {
    std::optional<uint32_t> prev;
    Status st = fuse::EnsureMaxPagesLimit(pages, &prev);
    if (!st.ok()) {
      notes_.push_back("could not raise max_pages_limit to " +
                       std::to_string(pages) + " (" + st.message() +
                       "); requests stay at 1 MiB, below the " + HumanBytes(S) +
                       " stripe: coalescing is what keeps backend writes "
                       "whole");
      pages = kDefaultMaxPages;
    } else if (prev) {
      notes_.push_back("raised /proc/sys/fs/fuse/max_pages_limit from " +
                       std::to_string(*prev) + " to " + std::to_string(pages));
    }
  }
  pages = std::max(pages, kDefaultMaxPages);
  so->transport = o_.transport;
  so->dev_threads = o_.dev_threads;
  so->dev_poll = o_.dev_poll;
  so->uring_read_workers = o_.uring_read_workers;
  so->uring_queues = o_.uring_queues;
  so->uring_inline_lone_reads = o_.uring_inline_lone_reads;
  so->uring_try_reads = o_.uring_try_reads;
  so->init.compound = o_.compound;
  so->refuse_compound = o_.refuse_compound;
  so->init.max_pages = pages;
  so->init.max_write = pages * kPageBytes;
  so->init.max_readahead =
      static_cast<uint32_t>(std::min<uint64_t>(S, 1u << 20));
  so->init.writeback_cache = o_.writeback_cache;
  // Close-to-open, and more: a buffered read(2) revalidates expired
  // attributes first and drops the pages when the size or mtime moved, so
  // another client's closed write (also a shrink) shows at the first read
  // after OPEN, not only after an fstat (docs/filesystem.md, read path).
  so->init.auto_inval_data = true;
  if (o_.align && (S & (S - 1)) == 0)
    so->init.align_page_order = static_cast<uint8_t>(__builtin_ctzll(S));
}

Status MountService::Up() {
  // --enable-uring: the kernel offers io-uring at INIT only while the fuse
  // module's enable_uring is Y; set it for the life of this mount.
  if (o_.enable_uring) {
    auto knob = fuse::EnableUring();
    if (!knob.ok()) return knob.status().Annotate("--enable-uring");
    uring_knob_ = std::move(knob).value();
    if (uring_knob_) {
      notes_.push_back(std::string(fuse::kEnableUringPath) + ": " +
                       uring_knob_->previous() + " -> Y (restored at unmount)");
    }
  }
  fuse::MountOptions mo;
  MountAttrs after_mount;
  STRIPEFS_RETURN_IF_ERROR(ParseMountOptions(o_, &mo, &after_mount));
  STRIPEFS_RETURN_IF_ERROR(OpenVolume());
  mo.fsname = o_.fsname.empty() ? volume_->description() : o_.fsname;
  fuse::SessionOptions so;
  DeriveFuseOptions(&so);
  so.request_observer = o_.request_observer;
  // POSIX ACLs: the kernel enforces them (it needs default_permissions);
  // we keep mode and ACL in step and apply the umask ourselves, since a
  // default ACL replaces it (posix_acl.h).
  so.init.posix_acl = mo.default_permissions;
  so.init.dont_mask = mo.default_permissions;
  permissions_ = mo.allow_other ? "multi-user (allow_other)" : "owner only";
  if (mo.default_permissions) {
    permissions_ += ", checked by the kernel with POSIX ACLs";
  } else {
    permissions_ += ", not checked by the kernel (no_default_permissions)";
  }

  // The kernel never updates atime of a FUSE inode (S_NOATIME): the atime
  // options the mount is given are carried out by StripeFs.
  StripeFsOptions fs_options = o_.fs;
  fs_options.atime = AtimeOptionsFrom(o_.mount_options, o_.fs.atime);
  fs_options.atime.read_only |= mo.read_only;
  fs_ = std::make_unique<StripeFs>(volume_.get(), fs_options);
  session_ = std::make_unique<fuse::Session>(fs_.get(), so);
  fs_->AttachSession(session_.get());
  auto mount = fuse::FuseMount::Mount(o_.mountpoint, mo);
  if (!mount.ok()) return mount.status().Annotate("mounting " + o_.mountpoint);
  mount_ = std::move(mount).value();
  STRIPEFS_RETURN_IF_ERROR(
      session_->Start(mount_->fd()).Annotate("starting the FUSE session"));
  if (!session_->WaitForInit(kInitTimeout)) {
    return Status(ETIMEDOUT, "the kernel did not send FUSE INIT within " +
                                 std::to_string(kInitTimeout.count()) +
                                 " s on " + o_.mountpoint);
  }
  STRIPEFS_RETURN_IF_ERROR(ApplyMountAttrs(o_.mountpoint, after_mount));
  if (o_.max_ratio >= 0) {
    Status rs = SetBdiMaxRatio(o_.mountpoint, o_.max_ratio);
    notes_.push_back(rs.ok() ? "bdi max_ratio set to " +
                                   std::to_string(o_.max_ratio)
                             : "could not set bdi max_ratio: " + rs.message());
  }
  if (o_.publish_runtime_files) PublishRuntimeFiles();
  return Status::Ok();
}

void MountService::PublishRuntimeFiles() {
  const RuntimePaths rp = RuntimePathsFor(o_.mountpoint);
  if (Status d = EnsureRuntimeDir(rp.dir); !d.ok()) {
    notes_.push_back("stats and pid file: not written: " + d.message());
    return;
  }
  StripeFs* fs = fs_.get();
  auto stats =
      StatsServer::Start(rp.socket, [fs] { return fs->StatsJson().dump(); });
  if (stats.ok()) {
    stats_ = std::move(stats).value();
    notes_.push_back("stats: stripefs stat " + o_.mountpoint + "  (socket " +
                     rp.socket + ")");
  } else {
    notes_.push_back("stats: unavailable: " + stats.status().ToString());
  }
  if (Status p = WritePidFile(rp.pidfile); p.ok()) {
    pidfile_ = rp.pidfile;
  } else {
    notes_.push_back("pid file: not written: " + p.message());
  }
}

std::vector<std::string> MountService::Describe() const {
  std::vector<std::string> out;
  const Geometry& geo = volume_->geometry();
  const fuse::NegotiatedInit n = session_->negotiated();
  out.push_back("stripefs: mounted " + volume_->description() + " at " +
                o_.mountpoint + " (pid " + std::to_string(::getpid()) + ")");
  out.push_back("  geometry: " + std::to_string(geo.k) + "+" +
                std::to_string(geo.m) + ", cell " + HumanBytes(geo.cell_size) +
                ", stripe " + HumanBytes(geo.stripe_size()));
  out.push_back("  protocol 7." + std::to_string(n.minor) + " (kernel 7." +
                std::to_string(n.kernel_minor) +
                "), transport: " + session_->active_transport() +
                (n.uring_offered ? "" : " (kernel did not offer io-uring)"));
  out.push_back("  max_pages: " + std::to_string(n.max_pages) +
                ", max_write: " + HumanBytes(n.max_write) +
                ", writeback cache: " + (n.writeback_cache() ? "yes" : "no"));
  out.push_back(
      std::string("  alignment requested: ") +
      (n.align_requested
           ? "yes (" + HumanBytes(uint64_t{1} << n.align_page_order) + ")"
           : "no") +
      ", acknowledged by kernel: " + (n.align_acknowledged ? "yes" : "no"));
  out.push_back(
      std::string("  compound requests: ") +
      (n.Has(fuse_abi::FUSE_HAS_COMPOUND)
           ? (o_.refuse_compound ? "agreed, answered ENOSYS (--compound enosys)"
                                 : "agreed (OPEN+GETATTR in one round trip)")
       : n.Offered(fuse_abi::FUSE_HAS_COMPOUND) ? "off"
                                                : "kernel does not offer"));
  const StripeFsOptions& fo = fs_->options();
  out.push_back(
      std::string("  coalescing: ") +
      (fo.coalesce ? "on (idle flush " + std::to_string(fo.idle_flush.count()) +
                         " ms, memory cap " + HumanBytes(fo.memory_cap) +
                         ", stripe sends in flight " +
                         std::to_string(fo.send_window) + " per mount, " +
                         std::to_string(fo.file_send_window) + " per file)"
                   : "off (every WRITE goes to the backend at once)"));
  out.push_back("  access: " + permissions_ +
                (n.Has(fuse_abi::FUSE_POSIX_ACL) ? "" : " (kernel: no ACLs)"));
  for (const auto& note : notes_) out.push_back("  " + note);
  out.push_back("  unmount: stripefs umount " + o_.mountpoint);
  return out;
}

Status MountService::ServeUntilUnmounted(StopSignals& stop) {
  // Clean unmount on a stop signal: flush, unmount while still serving (the
  // kernel writes dirty pages back through us), then the session ends.
  stop.OnStop([this](int s) {
    std::fprintf(stderr, "stripefs: signal %d: unmounting %s\n", s,
                 o_.mountpoint.c_str());
    (void)fs_->FlushAll(FlushReason::kDestroy);
    fuse::UnmountOrDetach(o_.mountpoint);
    session_->Stop();
  });
  Status why = session_->Wait();
  stop.CancelOnStop();  // no callback once the caller tears down
  return why;
}

Status MountService::Stop() {
  if (stopped_) return Status::Ok();
  stopped_ = true;
  Status first;
  if (mount_ && fuse::IsFuseMountPoint(o_.mountpoint))
    fuse::UnmountOrDetach(o_.mountpoint);
  if (session_) {
    session_->Stop();
    Status why = session_->Wait();
    if (!why.ok()) first = why.Annotate("session ended");
  }
  if (stats_) stats_->Stop();
  stats_.reset();
  if (fs_) {
    Status fl = fs_->FlushAll(FlushReason::kDestroy);
    if (!fl.ok() && first.ok()) first = fl.Annotate("final flush");
  }
  mount_.reset();
  if (fs_) fs_->DetachSession();
  session_.reset();
  fs_.reset();
  volume_.reset();
  uring_knob_.reset();
  if (!pidfile_.empty()) ::unlink(pidfile_.c_str());
  return first;
}

void MountService::RemoveCreatedVolume() {
  if (!created_volume_ || o_.volume_dir.empty()) return;
  std::error_code ec;
  if (created_volume_dir_) {
    sfs::remove_all(o_.volume_dir, ec);
    return;
  }
  for (const auto& e : sfs::directory_iterator(o_.volume_dir, ec))
    sfs::remove_all(e.path(), ec);
}

}  // namespace stripefs::fs

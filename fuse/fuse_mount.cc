#define FUSE_USE_VERSION 314
#include "fuse/fuse_mount.h"

#include <fuse_lowlevel.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

extern char** environ;

namespace stripefs::fuse {
namespace {

// Backslash-escapes commas so a value survives libfuse's -o splitting.
std::string EscapeOpt(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// /proc/self/mountinfo escapes spaces etc. as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (int k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// libfuse reports why it rejected an option or a mount through fuse_log
// (stderr by default, which a daemon may have redirected). While a mount is
// being made the messages are collected so the error can carry them.
std::mutex g_log_mu;  // one capture at a time (the log function is global)
std::string* g_log_sink = nullptr;

void CaptureLog(enum fuse_log_level, const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  std::string line = buf;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (g_log_sink && !line.empty())
    *g_log_sink += (g_log_sink->empty() ? "" : "; ") + line;
}

class LogCapture {
 public:
  LogCapture() : lock_(g_log_mu) {
    g_log_sink = &text_;
    fuse_set_log_func(CaptureLog);
  }
  ~LogCapture() {
    fuse_set_log_func(nullptr);  // back to libfuse's stderr logger
    g_log_sink = nullptr;
  }
  // What libfuse said, as " (libfuse: ...)", or "".
  std::string Reason() const {
    return text_.empty() ? "" : " (libfuse: " + text_ + ")";
  }

 private:
  std::lock_guard<std::mutex> lock_;
  std::string text_;
};

}  // namespace

Result<std::unique_ptr<FuseMount>> FuseMount::Mount(
    const std::string& mountpoint, const MountOptions& opts) {
  // Only a missing device is refused here: whether a user may open it is
  // for the mount path (libfuse, fusermount3) to find out and say.
  if (::access("/dev/fuse", F_OK) != 0) {
    return Status::FromErrno(errno,
                             "/dev/fuse is missing; load the fuse module "
                             "(modprobe fuse) or run where /dev/fuse exists");
  }
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("mount point " + mountpoint +
                                   " is not an existing directory");
  }
  std::string o = "fsname=" + EscapeOpt(opts.fsname) +
                  ",subtype=" + EscapeOpt(opts.subtype);
  if (opts.allow_other) o += ",allow_other";
  if (opts.default_permissions) o += ",default_permissions";
  if (opts.auto_unmount) o += ",auto_unmount";
  if (opts.read_only) o += ",ro";
  if (!opts.extra_options.empty()) o += "," + opts.extra_options;

  std::vector<std::string> argv_s = {"stripefs", "-o", o};
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  struct fuse_args args =
      FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  struct fuse_lowlevel_ops noops;
  std::memset(&noops, 0, sizeof(noops));
  LogCapture log;
  struct fuse_session* se =
      fuse_session_new(&args, &noops, sizeof(noops), nullptr);
  fuse_opt_free_args(&args);  // libfuse may have copied/extended argv
  if (!se) {
    return Status::InvalidArgument("libfuse rejected the mount options '" + o +
                                   "'" + log.Reason());
  }
  if (fuse_session_mount(se, mountpoint.c_str()) != 0) {
    fuse_session_destroy(se);
    std::string fix;
    if (::geteuid() != 0 && ::access("/dev/fuse", R_OK | W_OK) != 0) {
      // fusermount3 opens the device as the user too: its mode decides.
      fix =
          "; /dev/fuse is closed to you: ask root for access (Debian "
          "ships it 0666; or `setfacl -m u:" +
          std::to_string(::getuid()) + ":rw /dev/fuse`)";
    } else if (::geteuid() != 0) {
      fix =
          "; as a user you need fusermount3 (setuid, package fuse3) and, "
          "for allow_other, user_allow_other in /etc/fuse.conf";
    }
    return Status(EPERM, "mounting FUSE at " + mountpoint + " failed" +
                             log.Reason() + fix);
  }
  std::unique_ptr<FuseMount> m(new FuseMount());
  m->se_ = se;
  m->fd_ = fuse_session_fd(se);
  m->mountpoint_ = mountpoint;
  return m;
}

FuseMount::~FuseMount() { Unmount(); }

void FuseMount::Unmount() {
  if (!se_) return;
  fuse_session_unmount(se_);  // closes the fd, umount2/fusermount3 -u
  fuse_session_destroy(se_);
  se_ = nullptr;
  fd_ = -1;
}

Status UnmountPath(const std::string& mountpoint, bool lazy) {
  if (::geteuid() == 0) {
    if (::umount2(mountpoint.c_str(), lazy ? MNT_DETACH : 0) != 0) {
      int err = errno;
      return Status::FromErrno(
          err,
          "umount " + mountpoint +
              (err == EBUSY ? " (busy: close files there or use lazy)" : ""));
    }
    return Status::Ok();
  }
  std::vector<std::string> a = {"fusermount3", "-u"};
  if (lazy) a.push_back("-z");
  a.push_back(mountpoint);
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid;
  int rc =
      posix_spawnp(&pid, "fusermount3", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    return Status::FromErrno(rc, "cannot run fusermount3 (install fuse3)");
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::IoError("fusermount3 -u " + mountpoint + " failed");
  }
  return Status::Ok();
}

void UnmountOrDetach(const std::string& mountpoint) {
  Status st = UnmountPath(mountpoint, /*lazy=*/false);
  if (st.ok()) return;
  std::fprintf(stderr, "stripefs: %s; detaching lazily\n",
               st.ToString().c_str());
  (void)UnmountPath(mountpoint, /*lazy=*/true);
}

namespace {

// Calls `each(mountpoint, fstype, source)` for every line of
// /proc/self/mountinfo, unescaped, until it returns true.
template <typename Fn>
void ForEachMount(Fn each) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string id, parent, devno, root, mnt;
    ss >> id >> parent >> devno >> root >> mnt;
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    std::string fstype, source;
    rest >> fstype >> source;
    if (each(Unescape(mnt), fstype, Unescape(source))) return;
  }
}

std::string RealPathOr(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) ? resolved : path;
}

}  // namespace

bool IsFuseMountPoint(const std::string& path) {
  const std::string want = RealPathOr(path);
  bool found = false;
  ForEachMount([&](const std::string& mnt, const std::string& fstype,
                   const std::string&) {
    found = mnt == want && fstype.rfind("fuse", 0) == 0;
    return found;
  });
  return found;
}

std::optional<std::string> FuseMountOfSource(const std::string& source) {
  std::optional<std::string> found;
  ForEachMount([&](const std::string& mnt, const std::string& fstype,
                   const std::string& src) {
    if (fstype.rfind("fuse", 0) == 0 && src == source) found = mnt;
    return found.has_value();
  });
  return found;
}

}  // namespace stripefs::fuse

// FuseMount: RAII for one FUSE mount made through libfuse3.
//
// Mount() uses fuse_session_new (no-op ops) + fuse_session_mount, which mounts
// directly as root or through fusermount3 otherwise (and for auto_unmount).
// The /dev/fuse fd it yields is driven by our engine (Session), never by
// libfuse. The destructor unmounts (fuse_session_unmount) and closes the fd;
// stop the Session serving the fd first.
//
// Unmount(mountpoint) is `stripefs umount MNT`: umount2 as root, else
// `fusermount3 -u`; lazy=true detaches a busy mount.
//
// Thread-safety: a FuseMount is owned by one thread; fd() may be read
// anywhere.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

struct fuse_session;

namespace stripefs::fuse {

struct MountOptions {
  std::string fsname = "stripefs";   // shown in /proc/mounts as source
  std::string subtype = "stripefs";  // type "fuse.<subtype>"
  bool allow_other = false;
  bool default_permissions = true;
  bool auto_unmount = false;  // needs fusermount3 (spawns a helper)
  bool read_only = false;
  std::string extra_options;  // comma-separated -o options, passed as is
};

class FuseMount {
 public:
  // Mounts at `mountpoint` (must exist, be a directory). Errors say what to
  // do (e.g. missing /dev/fuse, not permitted, fusermount3 absent).
  static Result<std::unique_ptr<FuseMount>> Mount(const std::string& mountpoint,
                                                  const MountOptions& opts);
  ~FuseMount();  // Unmount() if still mounted
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  int fd() const { return fd_; }
  const std::string& mountpoint() const { return mountpoint_; }
  // Unmounts now (idempotent). The fd is closed afterwards.
  void Unmount();

 private:
  FuseMount() = default;
  struct fuse_session* se_ = nullptr;
  int fd_ = -1;
  std::string mountpoint_;
};

// `stripefs umount MNT`: unmount a FUSE mount by path (umount2 when root,
// `fusermount3 -u [-z]` otherwise).
Status UnmountPath(const std::string& mountpoint, bool lazy = false);
// Unmounts `mountpoint`; if that fails (busy), says so on stderr and detaches
// it lazily. What a stopping mount does.
void UnmountOrDetach(const std::string& mountpoint);

// True if `path` is a mount point of a FUSE file system (/proc/self/mountinfo).
bool IsFuseMountPoint(const std::string& path);

// The mount point of a FUSE mount whose source (as /proc/self/mountinfo shows
// it) is `source`; nullopt if none.
std::optional<std::string> FuseMountOfSource(const std::string& source);

}  // namespace stripefs::fuse

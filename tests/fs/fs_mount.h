// FsMount: test fixture helper that serves a stripefs volume on a fresh
// temporary mountpoint, in this process, through MountService -- the same
// code and FUSE configuration as `stripefs mount` (geometry-derived
// max_pages and alignment). The volume is either embedded (a fresh volume
// directory) or a fresh local cluster (tests/support/local_cluster.h: metad
// + N chunkd on loopback started with the real `stripefs cluster up`)
// reached as `stripefs mount --meta --key` does. With `space_limit_mib` the
// volume (or cluster) directory is a tmpfs of that size, for full-disk tests.
// The destructor always unmounts (lazily if busy), stops the session, takes the
// cluster down (`stripefs cluster down`, SIGKILL after a grace period),
// unmounts the tmpfs and removes the temporary directories, also when a test
// failed or Start() failed half way. Remount() keeps the volume (directory or
// running cluster).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/client/volume.h"
#include "common/status.h"
#include "fs/mount_service.h"
#include "fs/stripe_fs.h"
#include "fuse/session.h"
#include "tests/support/local_cluster.h"

namespace stripefs::fs::testing {

// "" when real mounts work here, else why not.
std::string MountSkipReason();

enum class FsBackend { kEmbedded, kCluster };
const char* FsBackendName(FsBackend b);  // "embedded" / "cluster"
// "" when a file system on backend `b` can be mounted here over transport
// `t`, else the whole skip message (no mount here, no local cluster possible,
// or no FUSE io-uring, and why; FsMount sets and restores the enable_uring
// knob).
std::string BackendSkipMessage(
    FsBackend b, fuse::TransportChoice t = fuse::TransportChoice::kDev);

struct FsMountOptions {
  FsBackend backend = FsBackend::kEmbedded;
  int cluster_servers = 6;  // chunkd processes (cluster backend)
  Geometry geometry;        // 4+2, 256 KiB cells by default
  StripeFsOptions fs;       // mountpoint is set by FsMount
  // The /dev/fuse transport by default. kUring sets the fuse module's
  // enable_uring for the life of the mount (restored at unmount) and fails
  // Start() if the session does not end up on io-uring.
  fuse::TransportChoice transport = fuse::TransportChoice::kDev;
  // > 0: the volume lives in a tmpfs of this many MiB (root).
  uint64_t space_limit_mib = 0;
  // -o values passed to MountService (e.g. "allow_other").
  std::vector<std::string> mount_options;
};

class FsMount {
 public:
  static Result<std::unique_ptr<FsMount>> Start(FsMountOptions opts = {});
  ~FsMount();
  const std::string& mnt() const { return mnt_; }
  // Embedded: the volume directory; cluster: the cluster directory (metad
  // and chunkd data, logs, cluster.key). Same file system either way.
  const std::string& volume_dir() const { return vol_dir_; }
  FsBackend backend() const { return opts_.backend; }
  std::string Path(const std::string& rel) const { return mnt_ + "/" + rel; }
  StripeFs& fs() { return service_->fs(); }
  fuse::Session& session() { return service_->session(); }
  Volume& volume() { return service_->volume(); }
  // Unmount + close the volume, then open and mount it again.
  Status Remount();
  // Cluster backend: another mount of the same cluster (another client) at
  // a fresh mountpoint named `name` under this fixture's directory, with
  // its own file system options. Destroy it before this FsMount.
  Result<std::unique_ptr<MountService>> MountAgain(const std::string& name,
                                                   StripeFsOptions fs,
                                                   bool writeback_cache);
  void Teardown();  // unmount and close (idempotent); kills a daemon
  // Crash tests: unmounts, then serves the same volume from a `stripefs
  // mount` daemon (the real binary) on the same mountpoint ...
  Status StartDaemon();
  // ... which this SIGKILLs (waits for it to exit, detaches the dead mount).
  // Remount() then mounts in process again, as after a crash.
  Status KillDaemon();

 private:
  FsMount() = default;
  Status Up();
  // The MountService options of a mount of this volume at `mnt`.
  MountServiceOptions ServiceOptions(const std::string& mnt,
                                     const StripeFsOptions& fs) const;
  FsMountOptions opts_;
  std::string root_, mnt_, vol_dir_;
  std::string space_dir_;  // the tmpfs, when space_limit_mib > 0
  std::unique_ptr<stripefs::testing::LocalCluster> cluster_;
  long daemon_pid_ = 0;  // StartDaemon, until KillDaemon
  std::unique_ptr<MountService> service_;
};

// Recursively removes `path` (best effort).
void RemoveTree(const std::string& path);

}  // namespace stripefs::fs::testing

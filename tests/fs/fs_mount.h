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

// kClusterEtcd: a local cluster whose metadata lives in etcd, served by 2
// metads (`cluster up --meta-engine etcd`; see FsMountOptions::etcd_members
// for which etcd); the mount is given both metads. kClusterClient: the
// kCluster cluster mounted with a client identity (`stripefs auth add
// client.mount`) instead of the server key, so every chunk request goes
// under metad's chunk grants.
enum class FsBackend { kEmbedded, kCluster, kClusterEtcd, kClusterClient };
// "embedded" / "cluster" / "cluster_etcd" / "cluster_client"
const char* FsBackendName(FsBackend b);
inline bool IsCluster(FsBackend b) { return b != FsBackend::kEmbedded; }
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
  // Embedded only: non-empty puts the volume at this path (made by the
  // volume itself when missing; e.g. on a LossyFs mount) instead of the
  // fixture's temporary directory. Left in place at teardown.
  std::string volume_dir;
  // -o values passed to MountService (e.g. "allow_other").
  std::vector<std::string> mount_options;
  // Cluster backends: how long metadata calls wait out an unreachable
  // metad (or one without an etcd quorum) before failing with EIO.
  int meta_hold_s = 60;
  // kClusterEtcd: 0 puts the volume (a fresh prefix) on the one-member etcd
  // this test process shares (tests/support/etcd_process.h: no etcd start
  // per test); N > 0 gives the cluster N etcd members of its own (failure
  // tests: kill the leader, lose the quorum).
  int etcd_members = 0;
  // MountServiceOptions::uring_try_reads (the default: on) and
  // uring_inline_lone_reads.
  bool uring_try_reads = true;
  bool uring_inline_lone_reads = true;
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
  // The cluster backends' local cluster (kill/start its daemons); null for
  // the embedded backend.
  stripefs::testing::LocalCluster* cluster() { return cluster_.get(); }
  fuse::Session& session() { return service_->session(); }
  Volume& volume() { return service_->volume(); }
  // Unmount + close the volume, then open and mount it again.
  Status Remount();
  // Cluster backend: another mount of the same cluster (another client) at
  // a fresh mountpoint named `name` under this fixture's directory, with
  // its own file system options. Destroy it before this FsMount. A
  // non-empty `meta_address` replaces the cluster's (e.g. one metad only).
  Result<std::unique_ptr<MountService>> MountAgain(
      const std::string& name, StripeFsOptions fs, bool writeback_cache,
      const std::string& meta_address = "");
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
  std::string key_file_;   // cluster backends: the key the mounts use
  std::unique_ptr<stripefs::testing::LocalCluster> cluster_;
  long daemon_pid_ = 0;  // StartDaemon, until KillDaemon
  std::unique_ptr<MountService> service_;
};

// Recursively removes `path` (best effort).
void RemoveTree(const std::string& path);

}  // namespace stripefs::fs::testing

// FsMount: test fixture helper that serves a stripefs volume through
// StripeFs + our FUSE engine on a fresh temporary mountpoint, in this
// process. The volume is either embedded (a fresh volume directory) or a
// fresh local cluster: metad + N chunkd on loopback started with the real
// `stripefs cluster up` and reached with Volume::ConnectCluster, exactly
// as `stripefs mount --meta --key` does. The destructor always unmounts
// (lazily if busy), stops the session, takes the cluster down (`stripefs
// cluster down`, SIGKILL after a grace period) and removes the temporary
// directories, also when a test failed or Start() failed half way.
// Remount() keeps the volume (directory or running cluster).
#pragma once

#include <memory>
#include <string>

#include "backend/client/volume.h"
#include "common/status.h"
#include "fuse-server/fs/stripe_fs.h"
#include "fuse-server/fuse_mount.h"
#include "fuse-server/session.h"

namespace stripefs::fs::testing {

// "" when real mounts work here, else why not.
std::string MountSkipReason();

enum class FsBackend { kEmbedded, kCluster };
const char* FsBackendName(FsBackend b);  // "embedded" / "cluster"
// "" when a local cluster can be started (the stripefs binary was built),
// else why not.
std::string ClusterSkipReason();

struct FsMountOptions {
  FsBackend backend = FsBackend::kEmbedded;
  int cluster_servers = 6;  // chunkd processes (cluster backend)
  Geometry geometry;        // 4+2, 256 KiB cells by default
  StripeFsOptions fs;
  fuse::SessionOptions session;
  fuse::MountOptions mount;
  FsMountOptions() {
    session.transport = fuse::TransportChoice::kDev;
    session.dev_threads = 4;
    session.init.align_page_order = 20;
  }
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
  StripeFs& fs() { return *fs_; }
  fuse::Session& session() { return *session_; }
  Volume& volume() { return *volume_; }
  // Unmount + close the volume, then open and mount it again.
  Status Remount();
  void Teardown();  // unmount and close (idempotent)

 private:
  FsMount() = default;
  Status Up();
  Status ClusterUp();
  void ClusterDown();
  FsMountOptions opts_;
  std::string root_, mnt_, vol_dir_;
  std::string meta_address_;  // cluster backend
  bool cluster_started_ = false;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<StripeFs> fs_;
  std::unique_ptr<fuse::Session> session_;
  std::unique_ptr<fuse::FuseMount> mount_;
};

// Recursively removes `path` (best effort).
void RemoveTree(const std::string& path);

}  // namespace stripefs::fs::testing

#include "tests/fs/fs_mount.h"

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fs/stats_socket.h"
#include "fuse/fuse_mount.h"
#include "fuse/kernel_knobs.h"
#include "tests/support/etcd_process.h"
#include "tests/support/run_command.h"

namespace stripefs::fs::testing {

std::string MountSkipReason() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    return "/dev/fuse is missing or not accessible on this host";
  }
  if (::geteuid() != 0) return "stripefs mount tests need root";
  return "";
}

const char* FsBackendName(FsBackend b) {
  switch (b) {
    case FsBackend::kCluster:
      return "cluster";
    case FsBackend::kClusterEtcd:
      return "cluster_etcd";
    case FsBackend::kClusterClient:
      return "cluster_client";
    case FsBackend::kEmbedded:
      break;
  }
  return "embedded";
}

std::string BackendSkipMessage(FsBackend b, fuse::TransportChoice t) {
  std::string why = MountSkipReason();
  if (!why.empty()) return "SKIPPED (cannot mount here): " + why;
  if (t == fuse::TransportChoice::kUring && !fuse::UringKnobPresent()) {
    return std::string("SKIPPED (no FUSE io-uring in this kernel): ") +
           fuse::kEnableUringPath + " is missing";
  }
  if (IsCluster(b)) {
    why = b == FsBackend::kClusterEtcd
              ? stripefs::testing::EtcdClusterSkipReason()
              : stripefs::testing::ClusterSkipReason();
    if (!why.empty()) return "SKIPPED (no local cluster possible): " + why;
  }
  return "";
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

Result<std::unique_ptr<FsMount>> FsMount::Start(FsMountOptions opts) {
  std::unique_ptr<FsMount> m(new FsMount());
  m->opts_ = std::move(opts);
  char tmpl[] = "/tmp/stripefs-fs-test.XXXXXX";
  if (!::mkdtemp(tmpl)) return Status::FromErrno(errno, "mkdtemp");
  m->root_ = tmpl;
  m->mnt_ = m->root_ + "/mnt";
  std::string parent = m->root_;
  std::filesystem::create_directories(m->mnt_);
  if (m->opts_.space_limit_mib > 0) {
    m->space_dir_ = m->root_ + "/space";
    std::filesystem::create_directories(m->space_dir_);
    const std::string size =
        "size=" + std::to_string(m->opts_.space_limit_mib) + "m";
    if (::mount("tmpfs", m->space_dir_.c_str(), "tmpfs", 0, size.c_str()) !=
        0) {
      Status st = Status::FromErrno(errno, "mount -t tmpfs -o " + size);
      m->space_dir_.clear();
      return st;
    }
    parent = m->space_dir_;
  }
  m->vol_dir_ = parent + (IsCluster(m->opts_.backend) ? "/cluster" : "/vol");
  if (!m->opts_.volume_dir.empty()) {
    if (IsCluster(m->opts_.backend))
      return Status::InvalidArgument("volume_dir is for the embedded backend");
    m->vol_dir_ = m->opts_.volume_dir;
  }
  if (IsCluster(m->opts_.backend)) {
    stripefs::testing::LocalClusterOptions co;
    co.servers = m->opts_.cluster_servers;
    co.k = m->opts_.geometry.k;
    co.m = m->opts_.geometry.m;
    co.cell_size = m->opts_.geometry.cell_size;
    co.dir = m->vol_dir_;
    co.down_grace_s = 5;
    if (m->opts_.backend == FsBackend::kClusterEtcd) {
      co.engine = stripefs::testing::MetaEngine::kEtcd;
      co.etcd_members = m->opts_.etcd_members;
      if (co.etcd_members == 0) {
        STRIPEFS_ASSIGN_OR_RETURN(co.etcd_location,
                                  stripefs::testing::SharedEtcdLocation("fs"));
      }
    }
    STRIPEFS_ASSIGN_OR_RETURN(m->cluster_,
                              stripefs::testing::LocalCluster::Start(co));
    m->key_file_ = m->cluster_->key_file();
    if (m->opts_.backend == FsBackend::kClusterClient) {
      m->key_file_ = m->vol_dir_ + "/mount.key";
      if (m->cluster_->Cli("auth add client.mount --meta " +
                           m->cluster_->meta_address() + " --key " +
                           m->cluster_->key_file() + " --out " +
                           m->key_file_) != 0)
        return Status::IoError("stripefs auth add client.mount failed:\n" +
                               m->cluster_->Log());
    }
  }
  STRIPEFS_RETURN_IF_ERROR(m->Up());
  return m;
}

MountServiceOptions FsMount::ServiceOptions(const std::string& mnt,
                                            const StripeFsOptions& fs) const {
  MountServiceOptions o;
  o.mountpoint = mnt;
  if (IsCluster(opts_.backend)) {
    o.meta_address = cluster_->meta_address();
    o.key_file = key_file_;
    o.meta_hold_s = opts_.meta_hold_s;
  } else {
    o.volume_dir = vol_dir_;
    o.geometry.k = opts_.geometry.k;
    o.geometry.m = opts_.geometry.m;
    o.geometry.cell_size = opts_.geometry.cell_size;
  }
  o.fs = fs;
  o.transport = opts_.transport;
  o.enable_uring = opts_.transport == fuse::TransportChoice::kUring;
  o.uring_try_reads = opts_.uring_try_reads;
  o.uring_inline_lone_reads = opts_.uring_inline_lone_reads;
  o.mount_options = opts_.mount_options;
  o.publish_runtime_files = false;  // no `stripefs stat` socket in tests
  return o;
}

Result<std::unique_ptr<MountService>> FsMount::MountAgain(
    const std::string& name, StripeFsOptions fs, bool writeback_cache,
    const std::string& meta_address) {
  if (!IsCluster(opts_.backend))
    return Status::InvalidArgument("only a cluster can be mounted twice");
  const std::string mnt = root_ + "/" + name;
  std::filesystem::create_directories(mnt);
  MountServiceOptions o = ServiceOptions(mnt, fs);
  o.writeback_cache = writeback_cache;
  if (!meta_address.empty()) o.meta_address = meta_address;
  return MountService::Start(std::move(o));
}

Status FsMount::Up() {
  auto s = MountService::Start(ServiceOptions(mnt_, opts_.fs));
  if (!s.ok()) return s.status();
  service_ = std::move(s).value();
  if (opts_.transport == fuse::TransportChoice::kUring &&
      service_->session().active_transport() != "uring") {
    return Status::IoError("io-uring was asked for but the session runs on " +
                           service_->session().active_transport() +
                           " (did another test reset enable_uring meanwhile?)");
  }
  return Status::Ok();
}

Status FsMount::StartDaemon() {
  Teardown();
  const std::string source =
      IsCluster(opts_.backend)
          ? "--meta " + cluster_->meta_address() + " --key " + key_file_
          : vol_dir_;
#ifdef STRIPEFS_BINARY
  auto run = stripefs::testing::RunCommand(
      std::string(STRIPEFS_BINARY) + " mount " + source + " " + mnt_ + " 2>&1");
  if (run.rc != 0) {
    return Status::IoError("stripefs mount failed (exit " +
                           std::to_string(run.rc) + "):\n" + run.out);
  }
#else
  return Status::NotSupported("built without the stripefs binary");
#endif
  std::ifstream pf(RuntimePathsFor(mnt_).pidfile);
  if (!(pf >> daemon_pid_) || daemon_pid_ <= 0) {
    daemon_pid_ = 0;
    return Status::IoError("no pid file after stripefs mount");
  }
  return Status::Ok();
}

Status FsMount::KillDaemon() {
  if (daemon_pid_ <= 0) return Status::InvalidArgument("no daemon running");
  const pid_t pid = static_cast<pid_t>(daemon_pid_);
  daemon_pid_ = 0;
  if (::kill(pid, SIGKILL) != 0) return Status::FromErrno(errno, "kill -9");
  // Not our child (the CLI daemonized it): poll until it is gone (5 s).
  for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i) ::usleep(50000);
  if (::kill(pid, 0) == 0) return Status::IoError("daemon survived SIGKILL");
  if (fuse::IsFuseMountPoint(mnt_)) {
    STRIPEFS_RETURN_IF_ERROR(fuse::UnmountPath(mnt_, true));
  }
  return Status::Ok();
}

void FsMount::Teardown() {
  if (daemon_pid_ > 0) (void)KillDaemon();
  if (!service_) return;
  Status st = service_->Stop();
  if (!st.ok()) std::fprintf(stderr, "teardown: %s\n", st.ToString().c_str());
  service_.reset();
}

Status FsMount::Remount() {
  Teardown();
  return Up();
}

FsMount::~FsMount() {
  Teardown();
  cluster_.reset();  // takes the cluster down
  if (!space_dir_.empty() && ::umount2(space_dir_.c_str(), MNT_DETACH) != 0)
    std::fprintf(stderr, "teardown: umount %s: %s\n", space_dir_.c_str(),
                 std::strerror(errno));
  if (!root_.empty()) RemoveTree(root_);
}

}  // namespace stripefs::fs::testing

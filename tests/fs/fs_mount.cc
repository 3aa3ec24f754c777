#include "tests/fs/fs_mount.h"

#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

namespace stripefs::fs::testing {

std::string MountSkipReason() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    return "/dev/fuse is missing or not accessible on this host";
  }
  if (::geteuid() != 0) return "stripefs mount tests need root";
  return "";
}

const char* FsBackendName(FsBackend b) {
  return b == FsBackend::kCluster ? "cluster" : "embedded";
}

std::string BackendSkipMessage(FsBackend b) {
  std::string why = MountSkipReason();
  if (!why.empty()) return "SKIPPED (cannot mount here): " + why;
  if (b == FsBackend::kCluster) {
    why = stripefs::testing::ClusterSkipReason();
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
  m->vol_dir_ =
      parent + (m->opts_.backend == FsBackend::kCluster ? "/cluster" : "/vol");
  if (m->opts_.backend == FsBackend::kCluster) {
    stripefs::testing::LocalClusterOptions co;
    co.servers = m->opts_.cluster_servers;
    co.k = m->opts_.geometry.k;
    co.m = m->opts_.geometry.m;
    co.cell_size = m->opts_.geometry.cell_size;
    co.dir = m->vol_dir_;
    co.down_grace_s = 5;
    STRIPEFS_ASSIGN_OR_RETURN(m->cluster_,
                              stripefs::testing::LocalCluster::Start(co));
  }
  STRIPEFS_RETURN_IF_ERROR(m->Up());
  return m;
}

Status FsMount::Up() {
  MountServiceOptions o;
  o.mountpoint = mnt_;
  if (opts_.backend == FsBackend::kCluster) {
    o.meta_address = cluster_->meta_address();
    o.key_file = cluster_->key_file();
  } else {
    o.volume_dir = vol_dir_;
    o.geometry.k = opts_.geometry.k;
    o.geometry.m = opts_.geometry.m;
    o.geometry.cell_size = opts_.geometry.cell_size;
  }
  o.fs = opts_.fs;
  o.transport = opts_.transport;
  o.mount_options = opts_.mount_options;
  o.publish_runtime_files = false;  // no `stripefs stat` socket in tests
  auto s = MountService::Start(std::move(o));
  if (!s.ok()) return s.status();
  service_ = std::move(s).value();
  return Status::Ok();
}

void FsMount::Teardown() {
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

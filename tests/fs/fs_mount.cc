#include "tests/fs/fs_mount.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace stripefs::fs::testing {

std::string MountSkipReason() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    return "/dev/fuse is missing or not accessible on this host";
  }
  if (::geteuid() != 0) return "stripefs mount tests need root";
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
  m->vol_dir_ = m->root_ + "/vol";
  std::filesystem::create_directories(m->mnt_);
  STRIPEFS_RETURN_IF_ERROR(m->Up());
  return m;
}

Status FsMount::Up() {
  EmbeddedVolumeOptions vo;
  vo.geometry = opts_.geometry;
  auto v = Volume::OpenEmbedded(vol_dir_, vo);
  if (!v.ok()) return v.status();
  volume_ = std::move(*v);
  StripeFsOptions fo = opts_.fs;
  fo.mountpoint = mnt_;
  fs_ = std::make_unique<StripeFs>(volume_.get(), fo);
  session_ = std::make_unique<fuse::Session>(fs_.get(), opts_.session);
  fs_->AttachSession(session_.get());
  auto mount = fuse::FuseMount::Mount(mnt_, opts_.mount);
  if (!mount.ok()) return mount.status();
  mount_ = std::move(*mount);
  STRIPEFS_RETURN_IF_ERROR(session_->Start(mount_->fd()));
  if (!session_->WaitForInit(std::chrono::seconds(10))) {
    return Status::IoError("kernel INIT did not arrive within 10 s");
  }
  return Status::Ok();
}

void FsMount::Teardown() {
  if (mount_) {
    Status st = fuse::UnmountPath(mnt_, false);
    if (!st.ok()) {
      std::fprintf(stderr, "teardown: %s; detaching lazily\n",
                   st.ToString().c_str());
      (void)fuse::UnmountPath(mnt_, true);
    }
  }
  if (session_) {
    session_->Stop();
    (void)session_->Wait();
  }
  mount_.reset();
  session_.reset();
  fs_.reset();  // flushes what is still buffered
  volume_.reset();
}

Status FsMount::Remount() {
  Teardown();
  return Up();
}

FsMount::~FsMount() {
  Teardown();
  if (!root_.empty()) RemoveTree(root_);
}

}  // namespace stripefs::fs::testing

#include "tests/fuse/mounted_session.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace stripefs::fuse::testing {

std::string MountSkipReason() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    return "/dev/fuse is missing or not accessible on this host";
  }
  if (::geteuid() != 0) return "mount tests need root (umount2/mount(2))";
  return "";
}

std::string UringSkipReason() {
  std::string r = MountSkipReason();
  if (!r.empty()) return r;
  if (!UringKnobPresent()) {
    return std::string("kernel has no FUSE io-uring (") + kEnableUringPath +
           " missing)";
  }
  return "";
}

Result<std::unique_ptr<MountedSession>> MountedSession::Start(
    RawFileSystem* fs, SessionOptions opts, MountOptions mopts) {
  std::unique_ptr<MountedSession> m(new MountedSession());
  char tmpl[] = "/tmp/stripefs-fuse-test.XXXXXX";
  if (!::mkdtemp(tmpl)) return Status::FromErrno(errno, "mkdtemp");
  m->dir_ = tmpl;
  if (opts.transport == TransportChoice::kUring) {
    auto knob = EnableUring();
    if (!knob.ok()) return knob.status();
    m->uring_knob_ = std::move(*knob);
  }
  m->session_ = std::make_unique<Session>(fs, opts);
  auto mount = FuseMount::Mount(m->dir_, mopts);
  if (!mount.ok()) return mount.status();
  m->mount_ = std::move(*mount);
  STRIPEFS_RETURN_IF_ERROR(m->session_->Start(m->mount_->fd()));
  if (!m->session_->WaitForInit(std::chrono::seconds(10))) {
    return Status::IoError("kernel INIT did not arrive within 10 s");
  }
  return m;
}

void MountedSession::Teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  if (mount_) {
    // Unmount while the session still serves (dirty pages get written),
    // then the workers see ENODEV and end.
    UnmountOrDetach(dir_);
  }
  if (session_) {
    session_->Stop();
    (void)session_->Wait();
  }
  mount_.reset();  // closes the fd (the mount is already gone)
  session_.reset();
  if (!dir_.empty()) ::rmdir(dir_.c_str());
  uring_knob_.reset();  // restores enable_uring
}

MountedSession::~MountedSession() { Teardown(); }

}  // namespace stripefs::fuse::testing

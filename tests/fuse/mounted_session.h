// MountedSession: test helper that mounts a RawFileSystem through our engine
// on a fresh temporary directory and always tears it down (unmount, stop,
// join, rmdir) in its destructor, also when a test fails midway.
// For the io-uring transport it enables the fuse module's enable_uring knob
// and restores the previous value afterwards.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "fuse/fuse_mount.h"
#include "fuse/kernel_knobs.h"
#include "fuse/session.h"

namespace stripefs::fuse::testing {

// Reason this host cannot run real mounts ("" when it can).
std::string MountSkipReason();
// Reason the io-uring transport cannot run here ("" when it can).
std::string UringSkipReason();

class MountedSession {
 public:
  static Result<std::unique_ptr<MountedSession>> Start(RawFileSystem* fs,
                                                       SessionOptions opts,
                                                       MountOptions mopts = {});
  ~MountedSession();
  const std::string& dir() const { return dir_; }
  std::string Path(const std::string& rel) const { return dir_ + "/" + rel; }
  Session& session() { return *session_; }
  // Unmounts and waits for the session (idempotent; the destructor calls it).
  void Teardown();

 private:
  MountedSession() = default;
  std::string dir_;
  std::unique_ptr<ScopedKnob> uring_knob_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<FuseMount> mount_;
  bool torn_down_ = false;
};

}  // namespace stripefs::fuse::testing

// Kernel knobs the FUSE engine depends on, with honest reporting.
//
// * /proc/sys/fs/fuse/max_pages_limit caps max_pages (default 256 = 1 MiB).
//   It is read when a connection is created, so raise it BEFORE mounting.
// * /sys/module/fuse/parameters/enable_uring makes the kernel offer
//   FUSE_OVER_IO_URING at INIT.
//
// ScopedKnob writes a value and restores the previous one on destruction
// (tests use it so the machine is left as found). Not thread-safe; knobs are
// machine-global, so concurrent users in other processes can interfere.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace stripefs::fuse {

inline constexpr const char* kMaxPagesLimitPath =
    "/proc/sys/fs/fuse/max_pages_limit";
inline constexpr const char* kEnableUringPath =
    "/sys/module/fuse/parameters/enable_uring";

// Reads a knob (trimmed). Error if absent/unreadable.
Result<std::string> ReadKnob(const std::string& path);
Status WriteKnob(const std::string& path, const std::string& value);

// Makes sure max_pages_limit >= pages. When it must be raised and we are not
// root (or the write fails) the error says the limit, the wanted value and
// the command to run. `previous` receives the old value when it was raised.
Status EnsureMaxPagesLimit(uint32_t pages,
                           std::optional<uint32_t>* previous = nullptr);

// True when the fuse module exposes enable_uring (kernel with
// CONFIG_FUSE_IO_URING).
bool UringKnobPresent();
// Reads enable_uring as bool.
Result<bool> UringEnabled();

// Writes `value` to `path` now and restores the previous value in the
// destructor (only if the write happened).
class ScopedKnob {
 public:
  static Result<std::unique_ptr<ScopedKnob>> Set(const std::string& path,
                                                 const std::string& value);
  ~ScopedKnob();
  ScopedKnob(const ScopedKnob&) = delete;
  ScopedKnob& operator=(const ScopedKnob&) = delete;
  const std::string& previous() const { return previous_; }

 private:
  ScopedKnob(std::string path, std::string previous)
      : path_(std::move(path)), previous_(std::move(previous)) {}
  std::string path_;
  std::string previous_;
};

// `--enable-uring`: sets enable_uring=Y (restored when the returned object
// dies). Errors explain how to do it by hand when not root / not supported.
Result<std::unique_ptr<ScopedKnob>> EnableUring();

}  // namespace stripefs::fuse

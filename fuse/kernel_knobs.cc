#include "fuse/kernel_knobs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace stripefs::fuse {

Result<std::string> ReadKnob(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::FromErrno(errno ? errno : ENOENT,
                             "cannot read kernel knob " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string v = ss.str();
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

Status WriteKnob(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::FromErrno(
        errno, "cannot open kernel knob " + path + " for writing (need root?)");
  }
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return Status::FromErrno(n < 0 ? err : EIO,
                             "writing '" + value + "' to " + path + " failed");
  }
  return Status::Ok();
}

Status EnsureMaxPagesLimit(uint32_t pages, std::optional<uint32_t>* previous) {
  auto cur = ReadKnob(kMaxPagesLimitPath);
  if (!cur.ok()) {
    // Kernels before 6.x have no knob: the compile-time limit is 256.
    if (pages <= 256) return Status::Ok();
    return Status(EOPNOTSUPP,
                  "this kernel has no " + std::string(kMaxPagesLimitPath) +
                      "; max_pages is capped at 256 (1 MiB), " +
                      std::to_string(pages) + " pages were requested");
  }
  uint32_t limit =
      static_cast<uint32_t>(std::strtoul(cur->c_str(), nullptr, 10));
  if (limit >= pages) return Status::Ok();
  if (pages > 65535) {
    return Status::InvalidArgument("max_pages " + std::to_string(pages) +
                                   " exceeds the kernel maximum 65535");
  }
  if (::geteuid() != 0) {
    return Status::PermissionDenied(
        "max_pages " + std::to_string(pages) + " needs " + kMaxPagesLimitPath +
        " >= " + std::to_string(pages) + " (now " + std::to_string(limit) +
        "); run as root: echo " + std::to_string(pages) + " > " +
        kMaxPagesLimitPath);
  }
  Status st = WriteKnob(kMaxPagesLimitPath, std::to_string(pages));
  if (!st.ok()) return st.Annotate("raising max_pages_limit");
  if (previous) *previous = limit;
  return Status::Ok();
}

bool UringKnobPresent() { return ::access(kEnableUringPath, F_OK) == 0; }

Result<bool> UringEnabled() {
  auto v = ReadKnob(kEnableUringPath);
  if (!v.ok()) return v.status();
  return !v->empty() &&
         (v->front() == 'Y' || v->front() == 'y' || v->front() == '1');
}

Result<std::unique_ptr<ScopedKnob>> ScopedKnob::Set(const std::string& path,
                                                    const std::string& value) {
  auto prev = ReadKnob(path);
  if (!prev.ok()) return prev.status();
  STRIPEFS_RETURN_IF_ERROR(WriteKnob(path, value));
  return std::unique_ptr<ScopedKnob>(new ScopedKnob(path, *prev));
}

ScopedKnob::~ScopedKnob() {
  Status st = WriteKnob(path_, previous_);
  if (!st.ok()) {
    std::fprintf(stderr, "stripefs-fuse: could not restore %s to '%s': %s\n",
                 path_.c_str(), previous_.c_str(), st.ToString().c_str());
  }
}

Result<std::unique_ptr<ScopedKnob>> EnableUring() {
  if (!UringKnobPresent()) {
    return Status::NotSupported(
        std::string("this kernel has no FUSE io-uring support (") +
        kEnableUringPath +
        " is missing; needs Linux >= 6.14 with "
        "CONFIG_FUSE_IO_URING)");
  }
  if (::geteuid() != 0) {
    return Status::PermissionDenied(
        std::string("enabling FUSE io-uring needs root: echo Y > ") +
        kEnableUringPath);
  }
  return ScopedKnob::Set(kEnableUringPath, "Y");
}

}  // namespace stripefs::fuse

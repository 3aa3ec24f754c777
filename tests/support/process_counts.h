// What this process holds, from /proc/self: threads, open fds, and the fds
// that are io_uring instances. For tests that check a teardown (unmount,
// server stop) leaves nothing behind. Header-only.
#pragma once

#include <filesystem>
#include <string>

namespace stripefs::testing {

inline int CountDirEntries(const char* dir) {
  int n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}
inline int CountThreads() { return CountDirEntries("/proc/self/task"); }
inline int CountFds() { return CountDirEntries("/proc/self/fd"); }

inline int CountRingFds() {
  int rings = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().find("io_uring") != std::string::npos) ++rings;
  }
  return rings;
}

}  // namespace stripefs::testing

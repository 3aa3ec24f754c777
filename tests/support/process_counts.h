// What this process holds, from /proc/self: threads, open fds, and the fds
// that are io_uring instances. For tests that check a teardown (unmount,
// server stop) leaves nothing behind. Also the voluntary context switches
// (= times a thread went to sleep) of the threads of one name, for tests
// that count wake-ups. Header-only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

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

// Sum of voluntary_ctxt_switches over this process's live threads whose
// name (comm) starts with `prefix`; `threads` (if set) gets their count.
inline uint64_t VoluntarySwitches(std::string_view prefix,
                                  int* threads = nullptr) {
  uint64_t sum = 0;
  int n = 0;
  for (auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name.rfind(prefix, 0) != 0) continue;
    std::ifstream status(t.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      constexpr std::string_view kKey = "voluntary_ctxt_switches:";
      if (line.rfind(kKey, 0) == 0) {
        sum += std::stoull(line.substr(kKey.size()));
        ++n;
        break;
      }
    }
  }
  if (threads) *threads = n;
  return sum;
}

}  // namespace stripefs::testing

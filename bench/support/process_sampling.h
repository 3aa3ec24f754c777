// What the C++ benchmarks sample of their own process and of the machine:
// CPU seconds used so far (user + system, all threads) and the load average,
// printed beside every ratio= line. Header-only; no state.
#pragma once

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace stripefs::bench {

// User + system CPU seconds of this process since it started.
inline double CpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// The 1, 5 and 15 minute load averages, joined by `sep`.
inline std::string LoadAvg(const std::string& sep = " ") {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + sep + b + sep + c;
}

}  // namespace stripefs::bench

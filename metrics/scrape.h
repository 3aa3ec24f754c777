// Reading Prometheus endpoints back: Scrape() fetches http://ADDR/metrics
// (one GET, HTTP/1.0, bounded size and time), ParseExposition() reads the
// text exposition format into series -> value. Used by `stripefs status`
// (metad's client count) and the metrics tests.
//
// Series keys are the sample lines' left side as written
// ('name{label="v",...}' or 'name'); # lines are skipped. The parser takes
// outside bytes: every line is bounds-checked, bad lines are skipped and
// counted, and nothing is allocated beyond the input's size.
// Thread-safety: free functions, no shared state.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stripefs::metrics {

inline constexpr size_t kMaxScrapeBytes = 16 << 20;

Result<std::string> Scrape(
    const std::string& address,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));

struct Exposition {
  std::map<std::string, double, std::less<>> series;
  size_t bad_lines = 0;
  // Sum of every series of metric `name` (all label sets); 0 when absent.
  double Sum(std::string_view name) const;
  bool Has(std::string_view name) const;
};
Exposition ParseExposition(std::string_view text);

}  // namespace stripefs::metrics

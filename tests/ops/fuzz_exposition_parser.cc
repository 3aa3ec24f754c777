// libFuzzer target: the Prometheus text parser takes bytes from the network.
// metrics/scrape.cc is compiled into this target with the fuzzer and
// sanitizer flags (tests/ops/CMakeLists.txt), so libFuzzer sees the parser's
// branches and ASan/UBSan check its accesses. Oracle: rendering the parsed
// series as "key value" lines and parsing that again gives the same series
// with no bad line, and Sum/Has agree with the series map.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metrics/scrape.h"

namespace {

using stripefs::metrics::Exposition;
using stripefs::metrics::ParseExposition;

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "exposition oracle failed: %s\n", what);
  std::abort();
}

bool SameValue(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

std::string_view NameOf(std::string_view key) {
  return key.substr(0, key.find('{'));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const Exposition e = ParseExposition(text);

  // Every kept line had a key and a value: no more series than lines.
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  Check(e.series.size() + e.bad_lines <= lines + 1, "more results than lines");

  std::string rendered;
  for (const auto& [key, value] : e.series) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.17g\n", value);
    rendered += key;
    rendered += buf;
  }
  const Exposition again = ParseExposition(rendered);
  Check(again.bad_lines == 0, "a rendered series line parsed as bad");
  Check(again.series.size() == e.series.size(), "round trip changed the count");
  for (auto a = e.series.begin(), b = again.series.begin();
       a != e.series.end() && b != again.series.end(); ++a, ++b) {
    Check(a->first == b->first, "round trip changed a key");
    Check(SameValue(a->second, b->second), "round trip changed a value");
  }

  // Sum and Has of each series name agree with the map itself.
  for (const auto& [key, value] : e.series) {
    const std::string_view name = NameOf(key);
    double sum = 0;
    for (const auto& [k, v] : e.series)
      if (NameOf(k) == name) sum += v;
    Check(e.Has(name), "Has misses a parsed series");
    Check(SameValue(e.Sum(name), sum), "Sum differs from the series");
    (void)value;
  }
  return 0;
}

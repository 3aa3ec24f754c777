// libFuzzer target: the Prometheus text parser takes bytes from the network.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "metrics/scrape.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto e = stripefs::metrics::ParseExposition(text);
  (void)e.Sum("a");
  (void)e.Has("stripefs_x");
  return 0;
}

#pragma once

// Polling for a condition another thread or process brings about. Bounded
// (never hangs a test) and never a timing assertion: a slow machine only
// takes longer to get there.

#include <chrono>
#include <thread>

namespace stripefs::testing {

// Polls `pred` every 10 ms for at most `limit`; true once it holds.
template <typename F>
bool Eventually(F pred,
                std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto step = std::chrono::milliseconds(10);
  for (auto waited = std::chrono::milliseconds(0); waited < limit;
       waited += step) {
    if (pred()) return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}

}  // namespace stripefs::testing

// How MetaStore and its parts re-run a transaction that lost to a
// concurrent change (kKvConflict, backend/meta/kv_store.h): at most
// kKvMaxAttempts runs, sleeping KvBackOff(attempt) between them.
//
// Thread-safety: stateless.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace stripefs {

inline constexpr int kKvMaxAttempts = 64;

// Up to ~10 ms, so metads that collide retry at different times.
inline void KvBackOff(int attempt) {
  std::this_thread::sleep_for(
      std::chrono::microseconds(100 * std::min(attempt, 100)));
}

}  // namespace stripefs

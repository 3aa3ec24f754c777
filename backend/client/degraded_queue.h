// DegradedQueue: stripes this client committed degraded because a chunk
// store refused chunk writes for space (ENOSPC: its reserve, near full),
// healed in the background once the stores take writes again. Stripes
// degraded by a server that was down are not noted: they wait for
// `stripefs repair` once it is back or marked out (as before).
//
// Contract:
//  * Note(ino, sv) remembers a degraded commit (sv.missing_mask != 0);
//    cheap and non-blocking (called under the stripe lock). At most
//    `capacity` stripes are held; a note beyond that is dropped and counted
//    (degraded_queue_overflow): the stripe stays degraded, `stripefs status`
//    shows it and `stripefs repair` heals it.
//  * A worker thread retries each stripe with exponential backoff
//    (initial_backoff doubling up to max_backoff): it reads the stripe's
//    committed version from metadata and, if it is still the noted version
//    with chunks missing, rebuilds them with RepairStripe (repairer.h),
//    which rewrites the chunks and clears missing_mask with
//    SetStripeMissing. A stripe whose version moved on is dropped (a newer
//    degraded commit noted itself); one found whole counts as repaired.
//  * Counters (ClientCounters): degraded_queued, degraded_repaired,
//    degraded_queue_overflow; still_degraded() is the number held now.
//  * Stop() (and the destructor) ends the worker, abandoning what is left
//    (those stripes stay degraded in the map, for status and repair).
//
// Known limit: a local write racing the worker on the same stripe can make
// it rewrite chunks of a version just replaced (its SetStripeMissing then
// fails ESTALE and is ignored); the leftovers are orphans scrub finds.
//
// Ownership: borrows the StripeClient (which owns the queue and stops it
// before its other parts go). Thread-safety: every method may be called
// from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "backend/client/client_counters.h"
#include "backend/meta/meta_service.h"
#include "common/thread_annotations.h"

namespace stripefs {

class StripeClient;

struct DegradedQueueOptions {
  size_t capacity = 4096;
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{30000};
};

class DegradedQueue {
 public:
  DegradedQueue(StripeClient* client, ClientCounters* counters,
                const DegradedQueueOptions& options);
  ~DegradedQueue() { Stop(); }
  DegradedQueue(const DegradedQueue&) = delete;
  DegradedQueue& operator=(const DegradedQueue&) = delete;

  void Note(uint64_t ino, const StripeVersion& sv) STRIPEFS_EXCLUDES(mu_);
  void Stop() STRIPEFS_EXCLUDES(mu_);
  uint64_t still_degraded() const STRIPEFS_EXCLUDES(mu_);

 private:
  struct Entry {
    StripeVersion sv;
    std::chrono::steady_clock::time_point due;
    std::chrono::milliseconds backoff;
  };
  using Key = std::pair<uint64_t, uint64_t>;  // (ino, stripe)

  void Run() STRIPEFS_EXCLUDES(mu_);
  // One attempt; true when the entry is done (repaired or moved on).
  bool Attempt(uint64_t ino, const StripeVersion& noted);

  StripeClient* const client_;
  ClientCounters* const counters_;
  const DegradedQueueOptions options_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Entry> entries_ STRIPEFS_GUARDED_BY(mu_);
  bool stop_ STRIPEFS_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace stripefs

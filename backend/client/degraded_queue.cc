#include "backend/client/degraded_queue.h"

#include <algorithm>
#include <vector>

#include "backend/client/repairer.h"
#include "backend/client/stripe_client.h"

namespace stripefs {

DegradedQueue::DegradedQueue(StripeClient* client, ClientCounters* counters,
                             const DegradedQueueOptions& options)
    : client_(client), counters_(counters), options_(options) {
  worker_ = std::thread([this] { Run(); });
}

void DegradedQueue::Stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

uint64_t DegradedQueue::still_degraded() const {
  MutexLock l(&mu_);
  return entries_.size();
}

void DegradedQueue::Note(uint64_t ino, const StripeVersion& sv) {
  if (sv.missing_mask == 0) return;
  {
    MutexLock l(&mu_);
    const Key key{ino, sv.stripe};
    auto it = entries_.find(key);
    if (it == entries_.end() && entries_.size() >= options_.capacity) {
      ClientCounters::Add(counters_->degraded_queue_overflow);
      return;
    }
    // A newer degraded commit of a queued stripe replaces its entry.
    entries_[key] = {
        sv, std::chrono::steady_clock::now() + options_.initial_backoff,
        options_.initial_backoff};
    ClientCounters::Add(counters_->degraded_queued);
  }
  cv_.notify_all();
}

bool DegradedQueue::Attempt(uint64_t ino, const StripeVersion& noted) {
  auto cur = client_->meta().GetStripes(ino, noted.stripe, 1);
  if (!cur.ok()) return false;  // metadata unreachable: try again later
  if (cur->empty() || cur->front().version != noted.version) {
    return true;  // replaced or dropped; a degraded successor noted itself
  }
  const StripeVersion& sv = cur->front();
  if (sv.missing_mask == 0) {  // healed meanwhile (stripefs repair)
    ClientCounters::Add(counters_->degraded_repaired);
    return true;
  }
  uint32_t unreachable = 0;
  auto r = RepairStripe(*client_, ino, sv, /*verify=*/false, &unreachable);
  if (!r.ok() || unreachable != 0) return false;
  ClientCounters::Add(counters_->degraded_repaired);
  return true;
}

void DegradedQueue::Run() {
  UniqueMutexLock l(&mu_);
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    auto next = std::chrono::steady_clock::time_point::max();
    std::vector<std::pair<Key, StripeVersion>> due;
    for (const auto& [key, e] : entries_) {
      if (e.due <= now)
        due.emplace_back(key, e.sv);
      else
        next = std::min(next, e.due);
    }
    if (due.empty()) {
      if (next == std::chrono::steady_clock::time_point::max()) {
        cv_.wait(l.native(), [this] {
          mu_.AssertHeld();
          return stop_ || !entries_.empty();
        });
      } else {
        cv_.wait_until(l.native(), next);
      }
      continue;
    }
    for (const auto& [key, sv] : due) {
      if (stop_) break;
      l.Unlock();
      const bool done = Attempt(key.first, sv);
      l.Lock();
      auto it = entries_.find(key);
      // A newer note of this stripe while we worked stays queued.
      if (it == entries_.end() || it->second.sv.version != sv.version) continue;
      if (done) {
        entries_.erase(it);
      } else {
        it->second.backoff =
            std::min(it->second.backoff * 2, options_.max_backoff);
        it->second.due = std::chrono::steady_clock::now() + it->second.backoff;
      }
    }
  }
}

}  // namespace stripefs

// ClientTable: metad's in-memory list of the clients that announce
// themselves (mounts, and `stripefs repair`/`scrub` runs with their
// progress), for `stripefs status` and metad's /metrics.
//
// Clients send a ClientRecord every few seconds (ClientLease); a record
// expires lease_ms after its last heartbeat, so a killed client disappears
// within its lease, and a clean exit sends finished=true and disappears at
// once. The last finished repair and scrub are kept (until metad restarts)
// so `status` can report how the last one ended.
//
// Not durable and not shared: each metad knows the clients that heartbeat
// it; after a metad restart the table refills within one heartbeat
// interval. Bounded: kMaxClients records, strings cut at kMaxText bytes.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {

// Progress of a repair or scrub as its Repairer reports it.
struct RepairReport {
  uint64_t stripes_total = 0;  // 0 until the walk knows it
  uint64_t stripes_seen = 0;
  uint64_t stripes_repaired = 0;
  uint64_t stripes_failed = 0;
  // Of stripes_failed: left degraded only because servers are down or do
  // not answer (nothing to rebuild onto until they are back or out).
  uint64_t stripes_unreachable = 0;
  uint64_t chunks_rebuilt = 0;
  uint64_t bytes_rebuilt = 0;
  uint64_t elapsed_ms = 0;
  friend bool operator==(const RepairReport&, const RepairReport&) = default;
};

struct ClientRecord {
  uint64_t id = 0;          // random, one per client process
  std::string kind;         // "mount", "repair" or "scrub"
  std::string description;  // host, pid and mountpoint or volume
  uint32_t lease_ms = 0;    // forgotten this long after the last heartbeat
  bool finished = false;    // the client's last heartbeat: it leaves
  RepairReport repair;      // kind "repair" / "scrub"
  uint64_t age_ms = 0;      // set by metad in ListClients: since last heard
  friend bool operator==(const ClientRecord&, const ClientRecord&) = default;
};

inline constexpr size_t kMaxClients = 65536;
inline constexpr size_t kMaxText = 256;
inline constexpr uint32_t kMinLeaseMs = 1000, kMaxLeaseMs = 600000;

class ClientTable {
 public:
  using Clock = std::chrono::steady_clock;

  // Records (or refreshes) `r`; finished records leave the live set.
  // EINVAL for an unknown kind; ENOSPC when kMaxClients are live.
  [[nodiscard]] Status Heartbeat(const ClientRecord& r) STRIPEFS_EXCLUDES(mu_);
  // Live records (expired ones are dropped first), then the last finished
  // repair and scrub (finished = true), each with age_ms.
  std::vector<ClientRecord> List() STRIPEFS_EXCLUDES(mu_);

  // For tests: the clock List and Heartbeat use.
  void SetClockForTest(Clock::time_point now) { test_now_ = now; }

 private:
  struct Entry {
    ClientRecord record;
    Clock::time_point last;
  };
  Clock::time_point Now() const {
    return test_now_ ? *test_now_ : Clock::now();
  }
  void Expire(Clock::time_point now) STRIPEFS_REQUIRES(mu_);

  Mutex mu_;
  std::map<uint64_t, Entry> live_ STRIPEFS_GUARDED_BY(mu_);
  std::map<std::string, Entry> last_done_  // by kind
      STRIPEFS_GUARDED_BY(mu_);
  std::optional<Clock::time_point> test_now_;
};

}  // namespace stripefs::rpc

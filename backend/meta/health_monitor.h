// HealthMonitor: metad's failure detector for chunk servers. Every
// `interval` it probes each registered server (state up or down, with an
// address) in parallel through a ServerProber with a short deadline, and
// changes the server's state in the cluster map (epoch bump) when:
//   up   -> down  after `down_after` consecutive missed probes;
//   down -> up    after `up_after` consecutive answered probes.
// Servers marked `out` are never probed nor changed: out moves data and is
// an operator (repair) decision. State changes are compare-and-set against
// the map entry the probe saw (MetaStore::SetServerStateIf), so a probe
// result never overrides an operator's change or a re-registration that
// happened meanwhile. Counters restart when a server's address changes.
//
// Ownership: borrows the MetaStore and the prober (both must outlive it).
// Thread-safety: RunRound() and Snapshot() may be called from any thread;
// Start()/Stop() from one owner thread. Stop() (also in the destructor)
// waits for a running round, which is bounded by the probe timeout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/meta/meta_store.h"
#include "backend/meta/server_prober.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs {

struct HealthMonitorOptions {
  std::chrono::milliseconds interval{1000};       // time between rounds
  std::chrono::milliseconds probe_timeout{1000};  // deadline of one probe
  uint32_t down_after = 3;  // consecutive misses: up -> down
  uint32_t up_after = 1;    // consecutive answers: down -> up
  // With several metads on one volume (etcd engine): this metad's name for
  // the leader lease (MetaStore::HoldLeadership, ttl 3 x interval); rounds
  // run only while it holds the lease. Empty: always run (one metad).
  std::string leader_id;
};

// What the monitor knows about one server (for logs, status, tests).
struct ServerHealth {
  uint32_t id = 0;
  std::string address;
  ServerState state = ServerState::kUp;  // map state after the last round
  uint32_t misses = 0;                   // consecutive missed probes
  uint32_t answers = 0;                  // consecutive answered probes
  uint64_t probes = 0;                   // probes sent at this address
  std::string last_error;                // of the last missed probe
};

struct HealthMonitorCounters {
  uint64_t rounds = 0;
  uint64_t probes = 0;
  uint64_t misses = 0;
  uint64_t marked_down = 0;
  uint64_t marked_up = 0;
  uint64_t skipped_not_leader = 0;  // rounds left to another metad
};

class HealthMonitor {
 public:
  using LogFn = std::function<void(const std::string&)>;
  // `log` receives one line per state change (default: stderr, "metad: ").
  HealthMonitor(MetaStore* store, ServerProber* prober,
                HealthMonitorOptions options = {}, LogFn log = nullptr);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // EINVAL naming the option when the options make no sense.
  static Status Validate(const HealthMonitorOptions& options);

  // Runs RunRound() every options.interval on a background thread.
  void Start();
  void Stop();

  // One round: reads the map, probes every up/down server in parallel,
  // applies the state changes. Errors reading or writing the map are
  // returned (and the round's probe results still count).
  Status RunRound();

  std::vector<ServerHealth> Snapshot() const STRIPEFS_EXCLUDES(mu_);
  HealthMonitorCounters counters() const STRIPEFS_EXCLUDES(mu_);

 private:
  // A state change a round decided on: `seen` is the map entry probed.
  struct Change {
    ServerInfo seen;
    ServerState to;
    std::string why;
  };

  void Loop();
  // With a leader_id: false (and counted) when another metad holds the
  // lease, so this round is left to it.
  Result<bool> HoldsLeaderLease() STRIPEFS_EXCLUDES(mu_);
  // Probes every target in parallel: one hung server must not delay the
  // others. One result per target.
  std::vector<Status> ProbeAll(const std::vector<ServerInfo>& targets) const;
  // Counts the round's results per server and returns the changes that
  // crossed down_after / up_after.
  std::vector<Change> RecordResults(const std::vector<ServerInfo>& targets,
                                    const std::vector<Status>& results)
      STRIPEFS_EXCLUDES(mu_);
  // Compare-and-sets each change in the map and logs those made; the first
  // error writing the map.
  Status ApplyChanges(const std::vector<Change>& changes)
      STRIPEFS_EXCLUDES(mu_);

  MetaStore* const store_;
  ServerProber* const prober_;
  const HealthMonitorOptions options_;
  LogFn log_;

  std::mutex round_mu_;  // one round at a time
  mutable Mutex mu_;
  std::map<uint32_t, ServerHealth> health_ STRIPEFS_GUARDED_BY(mu_);
  HealthMonitorCounters counters_ STRIPEFS_GUARDED_BY(mu_);

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::thread thread_;
};

}  // namespace stripefs

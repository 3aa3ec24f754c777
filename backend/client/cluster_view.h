// ClusterView: a client's current picture of the cluster map, and where the
// chunks of each stripe live under it.
//
// Holds the last cluster map read from metadata and the placement built
// from it. A background thread re-reads the map every refresh_interval
// (sooner when RequestRefresh() is called after a transport error), so
// servers metad marks down are skipped without a call. Also remembers
// "suspect" servers (recently slow or unreachable) so reads can route
// around them before the map says they are down.
//
// Ownership: borrows the MetaService, ChunkServerSet and ClientCounters
// (they must outlive the view). Thread-safety: every method may be called
// concurrently; a ChunkLayout is a copy, valid after the map changes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/client/chunk_server_set.h"
#include "backend/client/client_counters.h"
#include "backend/client/placement.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"

namespace stripefs {

// The servers of one stripe's k+m chunks under the map it was made from.
struct ChunkLayout {
  std::vector<ServerInfo> servers;      // per chunk index
  std::vector<ChunkService*> services;  // null = unknown server

  // The service holding chunk index i, or null (and *why set) when its
  // server is down or unknown.
  ChunkService* Usable(size_t i, Status* why) const;
  // True when chunk index i can be asked at all (known and up).
  bool IsUp(size_t i) const {
    return services[i] != nullptr && servers[i].state == ServerState::kUp;
  }
};

class ClusterView {
 public:
  // Does not read the map: call Refresh() before the first LayoutFor().
  // refresh_interval 0: no background thread.
  ClusterView(MetaService* meta, ChunkServerSet* servers, uint32_t width,
              std::chrono::milliseconds refresh_interval,
              ClientCounters* counters);
  ~ClusterView();  // stops the refresher
  ClusterView(const ClusterView&) = delete;
  ClusterView& operator=(const ClusterView&) = delete;

  // Re-reads the map from metadata and rebuilds placement.
  Status Refresh();
  // Same, but only rebuilds placement when the map changed; true if it did.
  Result<bool> RefreshIfChanged();
  // Asks the refresher thread to re-read the map soon (non-blocking).
  void RequestRefresh();
  uint64_t epoch();

  ChunkLayout LayoutFor(uint64_t ino, uint64_t stripe);
  // The same, shared and not copied: built once per placement group and
  // map (the read path asks for one per READ), valid after the map changes.
  std::shared_ptr<const ChunkLayout> SharedLayoutFor(uint64_t ino,
                                                     uint64_t stripe);
  // Every server of the current map is up (cheap: no layout built).
  bool AllUp() const { return all_up_.load(std::memory_order_relaxed); }

  // Servers a chunk read recently found slow or unreachable, for a window
  // long enough for metad to mark a hung server down.
  bool IsSuspect(uint32_t server);
  void MarkSuspect(uint32_t server, bool suspect);

 private:
  void RefreshLoop();
  // Installs `map` and its placement. map_mu_ held.
  void Install(ClusterMap map, std::shared_ptr<const Placement> placement);

  MetaService* const meta_;
  ChunkServerSet* const servers_;
  const uint32_t width_;
  const std::chrono::milliseconds refresh_interval_;
  ClientCounters* const counters_;

  std::mutex map_mu_;
  ClusterMap map_;  // guarded by map_mu_
  // The same map, shared: LayoutFor takes it without copying the map.
  std::shared_ptr<const ClusterMap> shared_map_;  // guarded by map_mu_
  std::atomic<bool> all_up_{false};
  std::shared_ptr<const Placement> placement_;  // guarded by map_mu_
  // Layouts of placement_ by placement group, built on first use.
  std::vector<std::shared_ptr<const ChunkLayout>> layouts_;  // map_mu_

  std::mutex suspect_mu_;
  std::map<uint32_t, std::chrono::steady_clock::time_point>
      suspect_until_;                // guarded by suspect_mu_
  std::atomic<size_t> suspects_{0};  // suspect_until_.size()

  std::mutex refresh_mu_;
  std::condition_variable refresh_cv_;
  bool refresh_stopping_ = false;   // guarded by refresh_mu_
  bool refresh_requested_ = false;  // guarded by refresh_mu_
  std::thread refresher_;           // last: stopped first (destructor)
};

}  // namespace stripefs

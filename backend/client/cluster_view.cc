#include "backend/client/cluster_view.h"

#include <algorithm>
#include <string>

namespace stripefs {

ChunkService* ChunkLayout::Usable(size_t i, Status* why) const {
  if (IsUp(i)) return services[i];
  *why = Status::Unavailable("chunk server " + std::to_string(servers[i].id) +
                             (services[i] ? " is down" : " is unknown"));
  return nullptr;
}

ClusterView::ClusterView(MetaService* meta, ChunkServerSet* servers,
                         uint32_t width,
                         std::chrono::milliseconds refresh_interval,
                         ClientCounters* counters)
    : meta_(meta),
      servers_(servers),
      width_(width),
      refresh_interval_(refresh_interval),
      counters_(counters) {
  if (refresh_interval_.count() > 0)
    refresher_ = std::thread([this] { RefreshLoop(); });
}

ClusterView::~ClusterView() {
  {
    std::lock_guard<std::mutex> lock(refresh_mu_);
    refresh_stopping_ = true;
  }
  refresh_cv_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

Status ClusterView::Refresh() {
  auto map = meta_->GetClusterMap();
  if (!map.ok()) return map.status().Annotate("reading cluster map");
  auto placement = Placement::Create(*map, width_);
  if (!placement.ok()) return placement.status();
  std::lock_guard<std::mutex> lock(map_mu_);
  Install(std::move(map).value(),
          std::make_shared<const Placement>(std::move(placement).value()));
  return Status::Ok();
}

Result<bool> ClusterView::RefreshIfChanged() {
  auto map = meta_->GetClusterMap();
  if (!map.ok()) return map.status().Annotate("reading cluster map");
  std::shared_ptr<const Placement> previous;
  {
    std::lock_guard<std::mutex> lock(map_mu_);
    if (map->epoch == map_.epoch && map->servers == map_.servers) return false;
    previous = placement_;  // lends its base when only states changed
  }
  auto placement = Placement::Create(*map, width_, previous.get());
  if (!placement.ok()) return placement.status();
  std::lock_guard<std::mutex> lock(map_mu_);
  if (map->epoch < map_.epoch) return false;  // a newer one won the race
  Install(std::move(map).value(),
          std::make_shared<const Placement>(std::move(placement).value()));
  ClientCounters::Add(counters_->map_updates);
  return true;
}

void ClusterView::Install(ClusterMap map,
                          std::shared_ptr<const Placement> placement) {
  bool all_up = true;
  for (const auto& s : map.servers) all_up &= s.state == ServerState::kUp;
  // A server metad saw come back (not up before, up now) is no longer
  // suspect: the suspicion only bridged the time until metad marked it
  // down, and keeping it would make repair skip the restarted server.
  std::vector<uint32_t> back;
  for (const auto& s : map.servers) {
    if (s.state != ServerState::kUp) continue;
    auto old = std::find_if(map_.servers.begin(), map_.servers.end(),
                            [&](const ServerInfo& o) { return o.id == s.id; });
    if (old != map_.servers.end() && old->state != ServerState::kUp)
      back.push_back(s.id);
  }
  for (uint32_t id : back) MarkSuspect(id, false);
  map_ = std::move(map);
  shared_map_ = std::make_shared<const ClusterMap>(map_);
  placement_ = std::move(placement);
  layouts_.clear();
  all_up_.store(all_up, std::memory_order_relaxed);
}

uint64_t ClusterView::epoch() {
  std::lock_guard<std::mutex> lock(map_mu_);
  return map_.epoch;
}

ChunkLayout ClusterView::LayoutFor(uint64_t ino, uint64_t stripe) {
  return *SharedLayoutFor(ino, stripe);
}

std::shared_ptr<const ChunkLayout> ClusterView::SharedLayoutFor(
    uint64_t ino, uint64_t stripe) {
  std::shared_ptr<const Placement> placement;
  std::shared_ptr<const ClusterMap> shared;
  uint32_t pg = 0;
  {
    std::lock_guard<std::mutex> lock(map_mu_);
    pg = placement_->PlacementGroup(ino, stripe);
    if (pg < layouts_.size() && layouts_[pg]) return layouts_[pg];
    placement = placement_;
    shared = shared_map_;  // so Get() runs unlocked
  }
  const ClusterMap& map = *shared;
  auto layout = std::make_shared<ChunkLayout>();
  for (uint32_t id : placement->ServersForGroup(pg)) {
    auto it = std::find_if(map.servers.begin(), map.servers.end(),
                           [&](const ServerInfo& s) { return s.id == id; });
    layout->servers.push_back(*it);
    layout->services.push_back(servers_->Get(*it));
  }
  std::lock_guard<std::mutex> lock(map_mu_);
  if (placement_ == placement) {  // else a newer map came meanwhile
    if (layouts_.size() <= pg) layouts_.resize(pg + 1);
    layouts_[pg] = layout;
  }
  return layout;
}

bool ClusterView::IsSuspect(uint32_t server) {
  // Usually nobody is: no lock, no clock read per chunk read.
  if (suspects_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(suspect_mu_);
  auto it = suspect_until_.find(server);
  if (it == suspect_until_.end()) return false;
  if (std::chrono::steady_clock::now() < it->second) return true;
  suspect_until_.erase(it);
  suspects_.store(suspect_until_.size(), std::memory_order_relaxed);
  return false;
}

void ClusterView::MarkSuspect(uint32_t server, bool suspect) {
  // Long enough for metad to mark a hung server down (3-4 s by default).
  constexpr auto kSuspectWindow = std::chrono::seconds(10);
  if (!suspect && suspects_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(suspect_mu_);
  if (suspect) {
    suspect_until_[server] = std::chrono::steady_clock::now() + kSuspectWindow;
  } else {
    suspect_until_.erase(server);
  }
  suspects_.store(suspect_until_.size(), std::memory_order_relaxed);
}

void ClusterView::RequestRefresh() {
  if (!refresher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(refresh_mu_);
    refresh_requested_ = true;
  }
  refresh_cv_.notify_all();
}

void ClusterView::RefreshLoop() {
  // Requested refreshes are at most this often (a dead server makes every
  // call request one until the map says it is down).
  constexpr auto kMinGap = std::chrono::milliseconds(100);
  std::unique_lock<std::mutex> lock(refresh_mu_);
  while (!refresh_stopping_) {
    refresh_cv_.wait_for(lock, refresh_interval_, [&] {
      return refresh_stopping_ || refresh_requested_;
    });
    if (refresh_stopping_) break;
    refresh_requested_ = false;
    lock.unlock();
    // Failure (metad unreachable) keeps the current map; calls go on.
    (void)RefreshIfChanged();
    lock.lock();
    refresh_cv_.wait_for(lock, kMinGap, [&] { return refresh_stopping_; });
  }
}

}  // namespace stripefs

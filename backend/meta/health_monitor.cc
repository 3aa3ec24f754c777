#include "backend/meta/health_monitor.h"

#include <cstdio>
#include <set>

namespace stripefs {

HealthMonitor::HealthMonitor(MetaStore* store, ServerProber* prober,
                             HealthMonitorOptions options, LogFn log)
    : store_(store), prober_(prober), options_(options), log_(std::move(log)) {
  if (!log_) {
    log_ = [](const std::string& line) {
      std::fprintf(stderr, "metad: %s\n", line.c_str());
    };
  }
}

HealthMonitor::~HealthMonitor() { Stop(); }

Status HealthMonitor::Validate(const HealthMonitorOptions& o) {
  if (o.interval.count() <= 0) {
    return Status::InvalidArgument(
        "--probe-interval-ms must be > 0 (0 would probe in a busy loop; "
        "use --no-health-monitor to turn probing off)");
  }
  if (o.probe_timeout.count() <= 0) {
    return Status::InvalidArgument("--probe-timeout-ms must be > 0");
  }
  if (o.down_after == 0) {
    return Status::InvalidArgument(
        "--down-after must be >= 1 (consecutive missed probes before a "
        "server is marked down)");
  }
  if (o.up_after == 0) {
    return Status::InvalidArgument(
        "--up-after must be >= 1 (consecutive answered probes before a "
        "down server is marked up)");
  }
  return Status::Ok();
}

void HealthMonitor::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void HealthMonitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::Loop() {
  std::string last_error;
  for (;;) {
    const auto next = std::chrono::steady_clock::now() + options_.interval;
    Status s = RunRound();
    // Log a failing round once, not every second.
    if (!s.ok() && s.ToString() != last_error) log_(s.ToString());
    last_error = s.ok() ? "" : s.ToString();
    std::unique_lock<std::mutex> lock(stop_mu_);
    if (stop_cv_.wait_until(lock, next, [&] { return stopping_; })) return;
  }
}

Status HealthMonitor::RunRound() {
  std::lock_guard<std::mutex> round(round_mu_);
  STRIPEFS_ASSIGN_OR_RETURN(bool leader, HoldsLeaderLease());
  if (!leader) return Status::Ok();
  auto map = store_->GetClusterMap();
  if (!map.ok()) {
    return map.status().Annotate("health monitor: reading the cluster map");
  }
  std::vector<ServerInfo> targets;
  for (const ServerInfo& s : map->servers) {
    if (s.state != ServerState::kOut && !s.address.empty())
      targets.push_back(s);
  }
  const std::vector<Status> results = ProbeAll(targets);
  return ApplyChanges(RecordResults(targets, results));
}

Result<bool> HealthMonitor::HoldsLeaderLease() {
  if (options_.leader_id.empty()) return true;
  auto leader =
      store_->HoldLeadership(options_.leader_id, 3 * options_.interval);
  if (!leader.ok()) {
    return leader.status().Annotate("health monitor: leader lease");
  }
  if (!*leader) {
    MutexLock lock(&mu_);
    counters_.skipped_not_leader++;
  }
  return *leader;
}

std::vector<Status> HealthMonitor::ProbeAll(
    const std::vector<ServerInfo>& targets) const {
  std::vector<Status> results(targets.size());
  std::vector<std::thread> threads;
  threads.reserve(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = prober_->Probe(targets[i], options_.probe_timeout);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<HealthMonitor::Change> HealthMonitor::RecordResults(
    const std::vector<ServerInfo>& targets,
    const std::vector<Status>& results) {
  std::vector<Change> changes;
  MutexLock lock(&mu_);
  counters_.rounds++;
  std::set<uint32_t> probed;
  for (const auto& t : targets) probed.insert(t.id);
  for (auto it = health_.begin(); it != health_.end();) {
    it = probed.count(it->first) ? std::next(it) : health_.erase(it);
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    const ServerInfo& s = targets[i];
    ServerHealth& h = health_[s.id];
    if (h.address != s.address || h.probes == 0) {
      h = ServerHealth{};
      h.id = s.id;
      h.address = s.address;
    }
    h.state = s.state;
    h.probes++;
    counters_.probes++;
    if (results[i].ok()) {
      h.misses = 0;
      h.answers++;
      if (s.state == ServerState::kDown && h.answers >= options_.up_after) {
        changes.push_back(
            {s, ServerState::kUp,
             "answers again (" + std::to_string(h.answers) +
                 (h.answers == 1 ? " probe)" : " probes in a row)")});
      }
    } else {
      h.answers = 0;
      h.misses++;
      h.last_error = results[i].ToString();
      counters_.misses++;
      if (s.state == ServerState::kUp && h.misses >= options_.down_after) {
        changes.push_back({s, ServerState::kDown,
                           "missed " + std::to_string(h.misses) +
                               " probes in a row (last: " + h.last_error +
                               ")"});
      }
    }
  }
  return changes;
}

Status HealthMonitor::ApplyChanges(const std::vector<Change>& changes) {
  Status first_error;
  for (const Change& c : changes) {
    auto changed = store_->SetServerStateIf(c.seen, c.to);
    if (!changed.ok()) {
      if (first_error.ok()) {
        first_error = changed.status().Annotate(
            "health monitor: marking chunkd " + std::to_string(c.seen.id) +
            " " + ServerStateName(c.to));
      }
      continue;
    }
    if (!*changed) continue;  // the entry changed meanwhile: next round
    uint64_t epoch = 0;
    if (auto m = store_->GetClusterMap(); m.ok()) epoch = m->epoch;
    {
      MutexLock lock(&mu_);
      (c.to == ServerState::kDown ? counters_.marked_down
                                  : counters_.marked_up)++;
      auto it = health_.find(c.seen.id);
      if (it != health_.end()) it->second.state = c.to;
    }
    log_("chunkd " + std::to_string(c.seen.id) + " at " + c.seen.address + " " +
         c.why + ": marked " + ServerStateName(c.to) + ", map epoch " +
         std::to_string(epoch));
  }
  return first_error;
}

std::vector<ServerHealth> HealthMonitor::Snapshot() const {
  MutexLock lock(&mu_);
  std::vector<ServerHealth> out;
  for (const auto& [id, h] : health_) out.push_back(h);
  return out;
}

HealthMonitorCounters HealthMonitor::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

}  // namespace stripefs

#include "backend/client/placement.h"

#include <map>
#include <string>

#include "backend/client/balanced_table.h"

namespace stripefs {

uint64_t PlacementHash(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

// What a kBalanced base depends on: the servers without their states.
std::vector<ServerInfo> BaseServers(const ClusterMap& map) {
  std::vector<ServerInfo> servers = map.servers;
  for (ServerInfo& s : servers) s.state = ServerState::kUp;
  return servers;
}

}  // namespace

Result<Placement> Placement::Create(const ClusterMap& map, uint32_t chunks,
                                    const Placement* previous) {
  if (chunks == 0) return Status::InvalidArgument("placement needs k+m > 0");
  Placement p;
  p.scheme_ = map.placement;
  p.epoch_ = map.epoch;
  p.chunks_ = chunks;
  if (map.placement == PlacementScheme::kBalanced) {
    if (map.placement_groups == 0 ||
        map.placement_groups > kMaxPlacementGroups) {
      return Status::InvalidArgument(
          "cluster map has " + std::to_string(map.placement_groups) +
          " placement groups (1.." + std::to_string(kMaxPlacementGroups) + ")");
    }
    p.pg_count_ = map.placement_groups;
    p.base_servers_ = BaseServers(map);
    if (previous != nullptr && previous->base_ != nullptr &&
        previous->base_servers_ == p.base_servers_ &&
        previous->chunks_ == chunks && previous->pg_count_ == p.pg_count_) {
      p.base_ = previous->base_;
    }
    STRIPEFS_ASSIGN_OR_RETURN(
        p.table_,
        BuildBalancedTable(map.servers, chunks, p.pg_count_, &p.base_));
    return p;
  }
  std::map<std::string, uint32_t> domain_ids;
  size_t usable = 0;
  for (const auto& s : map.servers) {
    // Servers without a domain are each their own domain.
    std::string domain = s.failure_domain.empty()
                             ? "server:" + std::to_string(s.id)
                             : s.failure_domain;
    auto [it, inserted] =
        domain_ids.emplace(domain, static_cast<uint32_t>(domain_ids.size()));
    const bool out = s.state == ServerState::kOut;
    p.candidates_.push_back({s.id, it->second, out});
    if (!out) ++usable;
  }
  if (usable < chunks) {
    return Status::InvalidArgument(
        "cluster has " + std::to_string(usable) +
        " usable chunk servers but each stripe needs " +
        std::to_string(chunks) + " (k+m): add servers or mark them back in");
  }
  p.domains_ = static_cast<uint32_t>(domain_ids.size());
  p.pg_count_ = kLegacyPgCount;
  p.table_.reserve(size_t{p.pg_count_} * chunks);
  for (uint32_t pg = 0; pg < p.pg_count_; ++pg) {
    for (uint32_t id : p.LegacyScan(pg)) p.table_.push_back(id);
  }
  return p;
}

uint32_t Placement::PlacementGroup(uint64_t inode, uint64_t stripe) const {
  if (scheme_ == PlacementScheme::kLegacy) {
    return static_cast<uint32_t>(PlacementHash(inode, stripe) % pg_count_);
  }
  return BalancedGroup(inode, stripe, pg_count_);
}

std::vector<uint32_t> Placement::ServersFor(uint64_t inode,
                                            uint64_t stripe) const {
  return ServersForGroup(PlacementGroup(inode, stripe));
}

std::vector<uint32_t> Placement::ServersForGroup(uint32_t pg) const {
  std::span<const uint32_t> row = Row(pg);
  return {row.begin(), row.end()};
}

std::vector<uint32_t> Placement::LegacyScan(uint32_t pg) const {
  const size_t n = candidates_.size();
  std::vector<size_t> chosen(chunks_, n);  // candidate index per chunk index
  std::vector<bool> taken(n, false);
  std::vector<uint32_t> domain_use(domains_, 0);

  // Best candidate for chunk index i among those `eligible`, restricted to
  // the least-used failure domains so chunks spread over domains.
  auto pick = [&](uint32_t i, auto eligible) {
    uint32_t min_use = UINT32_MAX;
    for (size_t c = 0; c < n; ++c)
      if (eligible(c))
        min_use = std::min(min_use, domain_use[candidates_[c].domain]);
    size_t best = n;
    uint64_t best_score = 0;
    const uint64_t seed = PlacementHash(pg, i);
    for (size_t c = 0; c < n; ++c) {
      if (!eligible(c) || domain_use[candidates_[c].domain] != min_use)
        continue;
      const uint64_t score = PlacementHash(seed, candidates_[c].id);
      if (best == n || score > best_score) {
        best = c;
        best_score = score;
      }
    }
    return best;
  };

  // 1. Base placement over every server, whatever its state.
  for (uint32_t i = 0; i < chunks_ && i < n; ++i) {
    size_t c = pick(i, [&](size_t x) { return !taken[x]; });
    chosen[i] = c;
    taken[c] = true;
    ++domain_use[candidates_[c].domain];
  }
  // 2. Indices on out servers move; nothing else does.
  for (uint32_t i = 0; i < chunks_; ++i) {
    if (chosen[i] < n && !candidates_[chosen[i]].out) continue;
    if (chosen[i] < n) --domain_use[candidates_[chosen[i]].domain];
    size_t c =
        pick(i, [&](size_t x) { return !taken[x] && !candidates_[x].out; });
    chosen[i] = c;
    taken[c] = true;
    ++domain_use[candidates_[c].domain];
  }
  std::vector<uint32_t> out;
  out.reserve(chunks_);
  for (uint32_t i = 0; i < chunks_; ++i)
    out.push_back(candidates_[chosen[i]].id);
  return out;
}

}  // namespace stripefs

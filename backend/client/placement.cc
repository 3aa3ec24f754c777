#include "backend/client/placement.h"

#include <map>
#include <string>

namespace stripefs {

uint64_t PlacementHash(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Result<Placement> Placement::Create(const ClusterMap& map, uint32_t chunks,
                                    uint32_t pg_count) {
  std::vector<Candidate> candidates;
  std::map<std::string, uint32_t> domain_ids;
  for (const auto& s : map.servers) {
    if (s.state == ServerState::kOut) continue;
    // Servers without a domain are each their own domain.
    std::string domain =
        s.failure_domain.empty() ? "server:" + std::to_string(s.id)
                                 : s.failure_domain;
    auto [it, inserted] =
        domain_ids.emplace(domain, static_cast<uint32_t>(domain_ids.size()));
    candidates.push_back({s.id, it->second});
  }
  if (candidates.size() < chunks) {
    return Status::InvalidArgument(
        "cluster has " + std::to_string(candidates.size()) +
        " usable chunk servers but each stripe needs " +
        std::to_string(chunks) + " (k+m): add servers or mark them back in");
  }
  if (pg_count == 0) return Status::InvalidArgument("pg_count must be > 0");
  return Placement(map.epoch, chunks, pg_count, std::move(candidates),
                   static_cast<uint32_t>(domain_ids.size()));
}

uint32_t Placement::PlacementGroup(uint64_t inode, uint64_t stripe) const {
  return static_cast<uint32_t>(PlacementHash(inode, stripe) % pg_count_);
}

std::vector<uint32_t> Placement::ServersFor(uint64_t inode,
                                            uint64_t stripe) const {
  return ServersForGroup(PlacementGroup(inode, stripe));
}

std::vector<uint32_t> Placement::ServersForGroup(uint32_t pg) const {
  std::vector<uint32_t> out;
  out.reserve(chunks_);
  std::vector<bool> taken(candidates_.size(), false);
  std::vector<uint32_t> domain_use(domains_, 0);
  // Spread evenly over domains: a domain may hold ceil(chunks/domains).
  for (uint32_t i = 0; i < chunks_; ++i) {
    uint32_t min_use = UINT32_MAX;
    for (size_t c = 0; c < candidates_.size(); ++c)
      if (!taken[c]) min_use = std::min(min_use, domain_use[candidates_[c].domain]);
    size_t best = candidates_.size();
    uint64_t best_score = 0;
    for (size_t c = 0; c < candidates_.size(); ++c) {
      if (taken[c] || domain_use[candidates_[c].domain] != min_use) continue;
      uint64_t score =
          PlacementHash(PlacementHash(pg, i), candidates_[c].id);
      if (best == candidates_.size() || score > best_score) {
        best = c;
        best_score = score;
      }
    }
    taken[best] = true;
    ++domain_use[candidates_[best].domain];
    out.push_back(candidates_[best].id);
  }
  return out;
}

}  // namespace stripefs

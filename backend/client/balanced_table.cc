#include "backend/client/balanced_table.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "backend/client/placement.h"

namespace stripefs {
namespace {

constexpr uint64_t kRingSalt = 0x5EEDBA1A9CEDull;
constexpr uint64_t kStealSalt = 0x57EA15ull;
constexpr uint32_t kStealProbes = 16;

struct Node {
  uint32_t id;
  uint32_t domain;
  uint32_t weight;
  bool out;
};

struct RingPoint {
  uint32_t pos;
  uint32_t node;
};

class Builder {
 public:
  Builder(const std::vector<ServerInfo>& servers, uint32_t chunks,
          uint32_t groups);
  // *base: the rows before out servers are re-placed; reused when set
  // (same servers, domains and weights), else set.
  Result<std::vector<uint32_t>> Build(
      std::shared_ptr<const std::vector<uint32_t>>* base);

 private:
  // Base: the first `chunks_` servers hold every row, then each later one
  // steals its share (replay).
  void Replay();
  void Steal(uint32_t n, uint32_t domains);
  bool Lighter(uint32_t a, uint32_t b) const;
  bool TakeFrom(uint32_t donor, uint32_t n, uint32_t domains);
  // Row fixes for the current map: domain spread, then out servers.
  void FixSpread(uint32_t g);
  void Override(uint32_t g);
  // True when row `row` with entry `index` set to node `n` spreads over
  // `domains` domains as evenly as `chunks_` allows and has `n` once.
  // How far row `row`, with entry `index` set to node `n`, is from spreading
  // over `domains` domains as evenly as `chunks_` allows (0 = even); *dup
  // when `n` is also at another index.
  uint32_t Excess(const uint32_t* row, uint32_t index, uint32_t n,
                  uint32_t domains, bool* dup) const;
  void Assign(uint32_t entry, uint32_t n);
  void MakeRing();
  uint32_t RingAt(uint64_t h) const;
  void SetCaps();
  uint32_t Probe(uint32_t g, uint32_t index, bool base, uint32_t domains,
                 uint32_t limit);

  const uint32_t chunks_;
  const uint32_t groups_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> order_;  // weight > 0, by id: the replay order
  std::vector<uint32_t> rows_;   // [g * chunks_ + i] -> node
  std::vector<std::vector<uint32_t>> held_;  // node -> its entries
  std::vector<uint32_t> slot_;               // entry -> index in held_
  uint32_t domains_ = 0;                     // domains of order_
  uint32_t in_domains_ = 0;    // of those, holding a server not out
  std::vector<uint32_t> cap_;  // (1 + 1/kSlackDen) x weighted share
  std::vector<RingPoint> ring_;
  std::vector<uint32_t> bucket_;  // first ring index per top-bits bucket
  uint32_t bucket_shift_ = 32;
  std::vector<uint32_t> donors_;  // replay: servers placed so far (a heap)
  std::vector<uint64_t> tie_;     // node -> hash of its id (heap ties)
  uint64_t weight_so_far_ = 0;
};

Builder::Builder(const std::vector<ServerInfo>& servers, uint32_t chunks,
                 uint32_t groups)
    : chunks_(chunks), groups_(groups) {
  std::map<std::string, uint32_t> domain_ids;
  for (const ServerInfo& s : servers) {
    std::string domain = s.failure_domain.empty()
                             ? "server:" + std::to_string(s.id)
                             : s.failure_domain;
    auto [it, inserted] =
        domain_ids.emplace(domain, static_cast<uint32_t>(domain_ids.size()));
    nodes_.push_back(
        {s.id, it->second, s.weight, s.state == ServerState::kOut});
  }
  for (uint32_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].weight > 0) order_.push_back(n);
  std::sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
    return nodes_[a].id < nodes_[b].id;
  });
  held_.resize(nodes_.size());
  for (const Node& n : nodes_) tie_.push_back(PlacementHash(kStealSalt, n.id));
}

uint32_t Builder::Excess(const uint32_t* row, uint32_t index, uint32_t n,
                         uint32_t domains, bool* dup) const {
  // Ideal: `r` domains with q + 1 entries, the others q (q = chunks/domains).
  const uint32_t q = chunks_ / std::max(domains, 1u);
  const uint32_t r = chunks_ % std::max(domains, 1u);
  uint32_t dom[32], count[32], used = 0, at_top = 0, over = 0;
  *dup = false;
  for (uint32_t j = 0; j < chunks_; ++j) {
    const uint32_t x = j == index ? n : row[j];
    *dup |= j != index && x == n;
    const uint32_t d = nodes_[x].domain;
    uint32_t k = 0;
    while (k < used && dom[k] != d) ++k;
    if (k == used) dom[used] = d, count[used++] = 0;
    ++count[k];
  }
  for (uint32_t k = 0; k < used; ++k) {
    over += count[k] > q + 1 ? count[k] - q - 1 : 0;
    at_top += count[k] >= q + 1;
  }
  return over + (at_top > r ? at_top - r : 0);
}

void Builder::Assign(uint32_t entry, uint32_t n) {
  const uint32_t old = rows_[entry];
  if (old != UINT32_MAX) {  // swap-remove from the old holder's list
    std::vector<uint32_t>& h = held_[old];
    const uint32_t at = slot_[entry];
    h[at] = h.back();
    slot_[h[at]] = at;
    h.pop_back();
  }
  rows_[entry] = n;
  slot_[entry] = static_cast<uint32_t>(held_[n].size());
  held_[n].push_back(entry);
}

// Donor `donor` gives new server `n` one entry whose row stays well spread.
bool Builder::TakeFrom(uint32_t donor, uint32_t n, uint32_t domains) {
  const std::vector<uint32_t>& h = held_[donor];
  if (h.empty()) return false;
  const uint64_t seed =
      PlacementHash(nodes_[n].id ^ kStealSalt, nodes_[donor].id);
  auto ok = [&](uint32_t entry) {
    const uint32_t* row = &rows_[size_t{entry / chunks_} * chunks_];
    const uint32_t i = entry % chunks_;
    bool dup = false, was_dup = false;
    const uint32_t after = Excess(row, i, n, domains, &dup);
    return !dup && after <= Excess(row, i, row[i], domains, &was_dup);
  };
  for (uint32_t a = 0; a < kStealProbes; ++a) {
    const uint32_t entry = h[PlacementHash(seed, a) % h.size()];
    if (ok(entry)) return Assign(entry, n), true;
  }
  const size_t start = PlacementHash(seed, kStealProbes) % h.size();
  for (size_t k = 0; k < h.size(); ++k) {
    const uint32_t entry = h[(start + k) % h.size()];
    if (ok(entry)) return Assign(entry, n), true;
  }
  return false;
}

// Server order_[n] takes round(entries x its weight / weight so far), one
// entry at a time from the server most loaded for its weight (ties by a
// hash of the id, so donors spread). donors_ is a heap of order_[0..n-1].
void Builder::Steal(uint32_t n, uint32_t domains) {
  weight_so_far_ += nodes_[order_[n]].weight;
  const uint32_t self = order_[n];
  const uint64_t target =
      (uint64_t{groups_} * chunks_ * nodes_[self].weight + weight_so_far_ / 2) /
      weight_so_far_;
  auto lighter = [this](uint32_t a, uint32_t b) { return Lighter(a, b); };
  std::vector<uint32_t> refused;
  for (uint64_t taken = 0; taken < target && !donors_.empty();) {
    std::pop_heap(donors_.begin(), donors_.end(), lighter);
    const uint32_t d = donors_.back();
    if (!TakeFrom(d, self, domains)) {
      donors_.pop_back();
      refused.push_back(d);
      continue;
    }
    ++taken;
    std::push_heap(donors_.begin(), donors_.end(), lighter);
  }
  refused.push_back(self);
  for (uint32_t d : refused) {
    donors_.push_back(d);
    std::push_heap(donors_.begin(), donors_.end(), lighter);
  }
}

// Heap order of donors: a before b when a holds less for its weight.
bool Builder::Lighter(uint32_t a, uint32_t b) const {
  const uint64_t la = held_[a].size() * uint64_t{nodes_[b].weight};
  const uint64_t lb = held_[b].size() * uint64_t{nodes_[a].weight};
  return la != lb ? la < lb : tie_[a] < tie_[b];
}

void Builder::Replay() {
  const size_t first = std::min<size_t>(chunks_, order_.size());
  for (uint32_t g = 0; g < groups_; ++g)
    for (uint32_t i = 0; i < chunks_; ++i)
      Assign(g * chunks_ + i, order_[(g + i) % first]);
  for (size_t k = 0; k < first; ++k) {
    donors_.push_back(order_[k]);
    weight_so_far_ += nodes_[order_[k]].weight;
  }
  std::make_heap(donors_.begin(), donors_.end(),
                 [this](uint32_t a, uint32_t b) { return Lighter(a, b); });
  std::vector<bool> seen(nodes_.size(), false);
  for (size_t k = 0; k < order_.size(); ++k) {
    const uint32_t d = nodes_[order_[k]].domain;
    if (!seen[d]) seen[d] = true, ++domains_;
    if (k >= first) Steal(static_cast<uint32_t>(k), domains_);
  }
}

void Builder::MakeRing() {
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    const uint64_t points =
        (uint64_t{nodes_[n].weight} * kRingPointsPerDefaultWeight +
         kDefaultServerWeight - 1) /
        kDefaultServerWeight;
    for (uint64_t r = 0; r < points; ++r) {
      const uint64_t h = PlacementHash(nodes_[n].id ^ kRingSalt, r);
      ring_.push_back({static_cast<uint32_t>(h >> 32), n});
    }
  }
  // Ties (equal positions) broken by server id: the same on every client.
  std::sort(ring_.begin(), ring_.end(), [&](RingPoint a, RingPoint b) {
    return a.pos != b.pos ? a.pos < b.pos
                          : nodes_[a.node].id < nodes_[b.node].id;
  });
  uint32_t bits = 0;
  while ((size_t{1} << bits) < ring_.size() && bits < 24) ++bits;
  bucket_shift_ = 32 - bits;
  bucket_.assign((size_t{1} << bits) + 1, 0);
  size_t r = 0;
  for (size_t b = 0; b < bucket_.size(); ++b) {
    const uint64_t lo = uint64_t{b} << bucket_shift_;
    while (r < ring_.size() && ring_[r].pos < lo) ++r;
    bucket_[b] = static_cast<uint32_t>(r);
  }
}

void Builder::SetCaps() {
  unsigned __int128 total_weight = 0;
  std::vector<bool> seen(nodes_.size(), false);
  for (uint32_t n : order_) {
    total_weight += nodes_[n].weight;
    if (!nodes_[n].out && !seen[nodes_[n].domain]) {
      seen[nodes_[n].domain] = true;
      ++in_domains_;
    }
  }
  cap_.assign(nodes_.size(), 0);
  const unsigned __int128 entries = uint64_t{groups_} * chunks_;
  for (uint32_t n : order_) {
    const unsigned __int128 num = entries * nodes_[n].weight * (kSlackDen + 1);
    const unsigned __int128 den = total_weight * kSlackDen;
    cap_[n] = static_cast<uint32_t>((num + den - 1) / den);
  }
}

uint32_t Builder::RingAt(uint64_t h) const {
  const uint32_t pos = static_cast<uint32_t>(h >> 32);
  size_t r = bucket_[pos >> bucket_shift_];
  while (r < ring_.size() && ring_[r].pos < pos) ++r;
  return ring_[r == ring_.size() ? 0 : r].node;
}

// A server for entry `index` of group g whose row then has an Excess of
// at most `limit` over `domains`: the first ring probe that fits (out
// servers skipped unless `base`; within the first kStrictProbes only those
// under their cap), else the least loaded server not in the row.
uint32_t Builder::Probe(uint32_t g, uint32_t index, bool base, uint32_t domains,
                        uint32_t limit) {
  const uint32_t* row = &rows_[size_t{g} * chunks_];
  const uint64_t seed = PlacementHash(g, index);
  for (uint32_t a = 0; a < 2 * kStrictProbes; ++a) {
    const uint32_t n = RingAt(PlacementHash(seed, a));
    if (!base && nodes_[n].out) continue;
    if (base && a < kStrictProbes && held_[n].size() >= cap_[n]) continue;
    bool dup = false;
    if (Excess(row, index, n, domains, &dup) <= limit && !dup) return n;
  }
  uint32_t best = UINT32_MAX;
  for (uint32_t n : order_) {
    if (!base && nodes_[n].out) continue;
    bool dup = false;
    for (uint32_t j = 0; j < chunks_; ++j) dup |= j != index && row[j] == n;
    if (!dup && (best == UINT32_MAX || held_[n].size() < held_[best].size()))
      best = n;
  }
  return best;
}

void Builder::FixSpread(uint32_t g) {
  uint32_t* row = &rows_[size_t{g} * chunks_];
  bool dup = false;
  for (uint32_t round = 0; round < 2 * chunks_; ++round) {
    const uint32_t excess = Excess(row, 0, row[0], domains_, &dup);
    if (excess == 0) return;
    // Move the last entry whose move lowers the excess.
    bool moved = false;
    for (uint32_t i = chunks_; i-- > 0 && !moved;) {
      const uint32_t n = Probe(g, i, true, domains_, excess - 1);
      bool d2 = false;
      if (n != UINT32_MAX && Excess(row, i, n, domains_, &d2) < excess && !d2) {
        Assign(g * chunks_ + i, n);
        moved = true;
      }
    }
    if (!moved) return;  // as even as these servers allow
  }
}

void Builder::Override(uint32_t g) {
  uint32_t* row = &rows_[size_t{g} * chunks_];
  for (uint32_t i = 0; i < chunks_; ++i) {
    if (!nodes_[row[i]].out) continue;
    bool dup = false;
    const uint32_t now = Excess(row, i, row[i], in_domains_, &dup);
    const uint32_t n = Probe(g, i, false, in_domains_, now);
    Assign(g * chunks_ + i, n);
  }
}

Result<std::vector<uint32_t>> Builder::Build(
    std::shared_ptr<const std::vector<uint32_t>>* base) {
  uint32_t usable = 0;
  for (const Node& n : nodes_) usable += n.weight > 0 && !n.out;
  if (usable < chunks_) {
    return Status::InvalidArgument(
        "cluster has " + std::to_string(usable) +
        " usable chunk servers but each stripe needs " +
        std::to_string(chunks_) + " (k+m): add servers or mark them back in");
  }
  rows_.assign(size_t{groups_} * chunks_, UINT32_MAX);
  slot_.assign(rows_.size(), 0);
  MakeRing();
  if (*base != nullptr && (*base)->size() == rows_.size()) {
    std::unordered_map<uint32_t, uint32_t> node_of;
    for (uint32_t n = 0; n < nodes_.size(); ++n) node_of[nodes_[n].id] = n;
    for (size_t e = 0; e < rows_.size(); ++e) {
      auto it = node_of.find((**base)[e]);
      if (it == node_of.end())
        return Status::InvalidArgument("stale placement base");
      Assign(static_cast<uint32_t>(e), it->second);
    }
    SetCaps();
  } else {
    Replay();
    SetCaps();
    for (uint32_t g = 0; g < groups_; ++g) FixSpread(g);
    auto ids = std::make_shared<std::vector<uint32_t>>(rows_);
    for (uint32_t& n : *ids) n = nodes_[n].id;
    *base = std::move(ids);
  }
  for (uint32_t g = 0; g < groups_; ++g) Override(g);
  for (uint32_t& n : rows_) n = nodes_[n].id;
  return std::move(rows_);
}

}  // namespace

uint32_t BalancedGroup(uint64_t inode, uint64_t stripe, uint32_t groups) {
  const uint64_t weyl = inode * 0x9E3779B97F4A7C15ull;
  const auto start = static_cast<uint32_t>(
      (static_cast<unsigned __int128>(weyl) * groups) >> 64);
  return static_cast<uint32_t>((uint64_t{start} + stripe % groups) % groups);
}

Result<std::vector<uint32_t>> BuildBalancedTable(
    const std::vector<ServerInfo>& servers, uint32_t chunks, uint32_t groups,
    std::shared_ptr<const std::vector<uint32_t>>* base) {
  if (chunks == 0 || chunks > 32 || groups == 0) {
    return Status::InvalidArgument(
        "balanced placement: k+m must be 1..32 "
        "and groups > 0");
  }
  std::shared_ptr<const std::vector<uint32_t>> none;
  return Builder(servers, chunks, groups).Build(base ? base : &none);
}

}  // namespace stripefs

#include "backend/client/orphan_purger.h"

#include <algorithm>
#include <cerrno>
#include <tuple>

namespace stripefs {
namespace {
// Orphans per group (their chunk deletes share one request per server).
constexpr size_t kGroup = 256;
// Stripes asked for per GetStripes call.
constexpr uint64_t kStripePage = 4096;
// PurgeInode calls in flight per group.
constexpr size_t kPurgesInFlight = 8;

bool StripeLess(const ObsoleteStripe& a, const ObsoleteStripe& b) {
  return std::tie(a.inode, a.stripe, a.version) <
         std::tie(b.inode, b.stripe, b.version);
}
}  // namespace

OrphanPurger::OrphanPurger(const Parts& parts) : p_(parts) {
  thread_ = std::thread([this] { Loop(); });
}

OrphanPurger::~OrphanPurger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();  // Loop() empties the queue before it returns
}

void OrphanPurger::Enqueue(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(ino);
  ++enqueued_;
  cv_.notify_all();
}

void OrphanPurger::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  cv_.wait(lock, [&] { return done_ >= target; });
}

void OrphanPurger::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and drained
    const size_t n = std::min(queue_.size(), kGroup);
    std::vector<uint64_t> inos(queue_.begin(), queue_.begin() + n);
    queue_.erase(queue_.begin(), queue_.begin() + n);
    lock.unlock();
    PurgeGroup(inos);
    lock.lock();
    done_ += n;
    cv_.notify_all();
  }
}

bool OrphanPurger::ListOrphanStripes(uint64_t ino,
                                     std::vector<ObsoleteStripe>* out) {
  auto attr = p_.meta->GetAttr(ino);
  if (!attr.ok()) {
    if (attr.status().code() != ENOENT) p_.errors->fetch_add(1);
    return false;  // ENOENT: purged already
  }
  if (attr->nlink != 0) return false;  // linked again: not an orphan
  const uint64_t stripe = p_.client->stripe_size();
  const uint64_t stripes = attr->size / stripe + 1;
  for (uint64_t first = 0; first < stripes; first += kStripePage) {
    auto page = p_.meta->GetStripes(ino, first, kStripePage);
    if (!page.ok()) {
      p_.errors->fetch_add(1);
      return false;
    }
    for (const StripeVersion& sv : *page)
      out->push_back({ino, sv.stripe, sv.version});
  }
  return true;
}

void OrphanPurger::PurgeGroup(const std::vector<uint64_t>& inos) {
  std::vector<uint64_t> orphans;
  std::vector<ObsoleteStripe> stripes;
  for (uint64_t ino : inos) {
    if (ListOrphanStripes(ino, &stripes)) orphans.push_back(ino);
  }
  // Chunks first: until PurgeInode the orphan stays listed for a restart.
  p_.client->DeleteStripes(stripes);
  p_.client->DrainGarbage();
  std::sort(stripes.begin(), stripes.end(), StripeLess);
  // Several PurgeInode calls in flight, so metad's group commit can cover
  // them with one sync.
  std::atomic<size_t> next{0};
  std::mutex rest_mu;
  std::vector<ObsoleteStripe> rest;
  auto purge = [&] {
    for (size_t i = next++; i < orphans.size(); i = next++) {
      std::vector<ObsoleteStripe> dropped;
      Status st = p_.meta->PurgeInode(orphans[i], &dropped);
      if (st.ok()) {
        p_.purged->fetch_add(1);
      } else if (st.code() != EBUSY && st.code() != ENOENT) {
        p_.errors->fetch_add(1);
      }
      // Stripes the listing did not see (none without a writer) go too.
      std::lock_guard<std::mutex> lock(rest_mu);
      for (const ObsoleteStripe& o : dropped) {
        if (!std::binary_search(stripes.begin(), stripes.end(), o, StripeLess))
          rest.push_back(o);
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(orphans.size(), kPurgesInFlight); ++t)
    threads.emplace_back(purge);
  purge();
  for (auto& t : threads) t.join();
  p_.client->DeleteStripes(rest);
}

}  // namespace stripefs

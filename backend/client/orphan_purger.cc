#include "backend/client/orphan_purger.h"

#include <algorithm>
#include <cerrno>
#include <tuple>

namespace stripefs {
namespace {
// Stripes asked for per GetStripes call.
constexpr uint64_t kStripePage = 4096;

bool StripeLess(const ObsoleteStripe& a, const ObsoleteStripe& b) {
  return std::tie(a.inode, a.stripe, a.version) <
         std::tie(b.inode, b.stripe, b.version);
}
}  // namespace

OrphanPurger::OrphanPurger(const Parts& parts)
    : p_(parts),
      queue_(
          kQueueCapacity, kGroup,
          [this](std::vector<uint64_t> inos) { PurgeGroup(inos); }, kLinger) {}

bool OrphanPurger::ListOneOrphan(uint64_t ino,
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

bool OrphanPurger::ListGroup(const std::vector<uint64_t>& inos,
                             std::vector<uint64_t>* orphans,
                             std::vector<ObsoleteStripe>* stripes) {
  std::vector<int32_t> codes;
  Status st = p_.meta->ListOrphanStripes(inos, &codes, stripes);
  if (st.code() == EOPNOTSUPP) {
    // A metad from before ListOrphanStripes: two reads per inode, then
    // Sync (the unlinks that made these orphans must be durable before
    // their chunks go: a metad may acknowledge them before its WAL sync).
    for (uint64_t ino : inos) {
      if (ListOneOrphan(ino, stripes)) orphans->push_back(ino);
    }
    if (orphans->empty()) return true;
    if (Status sync = p_.meta->Sync(); !sync.ok()) {
      p_.errors->fetch_add(orphans->size());
      return false;  // they stay orphans: the next mount queues them again
    }
    return true;
  }
  if (!st.ok()) {
    // Nothing is known, nothing was made durable: they stay orphans.
    p_.errors->fetch_add(inos.size());
    return false;
  }
  // Durable now: the call synced before it answered (it listed an orphan).
  for (size_t i = 0; i < inos.size(); ++i) {
    if (codes[i] == 0) {
      orphans->push_back(inos[i]);
    } else if (codes[i] == E2BIG) {
      // More stripes than one answer holds: paged reads. Its unlink was
      // made durable by the call (which also lists nothing of it).
      if (ListOneOrphan(inos[i], stripes)) orphans->push_back(inos[i]);
    } else if (codes[i] != ENOENT && codes[i] != EBUSY) {
      p_.errors->fetch_add(1);  // ENOENT: purged already; EBUSY: linked
    }
  }
  return true;
}

void OrphanPurger::PurgeGroup(const std::vector<uint64_t>& inos) {
  std::vector<uint64_t> orphans;
  std::vector<ObsoleteStripe> stripes;
  if (!ListGroup(inos, &orphans, &stripes) || orphans.empty()) return;
  // Chunks first: until their metadata goes the orphans stay listed for a
  // restart. Empty files have none: nothing to send or wait for.
  if (!stripes.empty()) {
    p_.client->DeleteStripes(stripes);
    p_.client->DrainGarbage();
  }
  if (p_.after_chunk_deletes) p_.after_chunk_deletes();
  std::vector<ObsoleteStripe> dropped = PurgeMetadata(orphans);
  // Stripes the listing did not see (none without a writer) go too.
  std::sort(stripes.begin(), stripes.end(), StripeLess);
  std::vector<ObsoleteStripe> rest;
  for (const ObsoleteStripe& o : dropped) {
    if (!std::binary_search(stripes.begin(), stripes.end(), o, StripeLess))
      rest.push_back(o);
  }
  if (rest.empty()) return;
  // The listing did not sync for them (ListOrphanStripes syncs only for the
  // stripes it lists): the unlinks and this purge must be durable before
  // chunks go on their strength. If the sync fails they are left to scrub.
  if (Status sync = p_.meta->Sync(); !sync.ok()) {
    p_.errors->fetch_add(1);
    return;
  }
  p_.client->DeleteStripes(rest);
}

std::vector<ObsoleteStripe> OrphanPurger::PurgeMetadata(
    const std::vector<uint64_t>& orphans) {
  std::vector<int32_t> codes;
  std::vector<ObsoleteStripe> dropped;
  Status st = p_.meta->PurgeInodes(orphans, &codes, &dropped);
  if (st.code() == EOPNOTSUPP) {
    // A metad from before PurgeInodes: one PurgeInode call per inode.
    dropped.clear();
    st = p_.meta->MetaService::PurgeInodes(orphans, &codes, &dropped);
  }
  if (!st.ok()) {
    // Nothing known per inode: they stay orphans for the next mount.
    p_.errors->fetch_add(orphans.size());
    return dropped;
  }
  for (int32_t code : codes) {
    if (code == 0) {
      p_.purged->fetch_add(1);
    } else if (code != EBUSY && code != ENOENT) {
      p_.errors->fetch_add(1);
    }
  }
  return dropped;
}

}  // namespace stripefs

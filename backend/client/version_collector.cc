#include "backend/client/version_collector.h"

#include <functional>
#include <map>

#include "backend/client/stripe_geometry.h"

namespace stripefs {

VersionCollector::VersionCollector(const Parts& parts, size_t capacity,
                                   std::chrono::milliseconds linger)
    : p_(parts),
      queue_(
          capacity, /*max_batch=*/0,
          [this](std::vector<Item> items) { Collect(std::move(items)); },
          linger) {}

void VersionCollector::Enqueue(const ObsoleteStripe& obsolete,
                               const ChunkLayout& layout, bool dropped) {
  if (obsolete.version == 0) return;
  Item item{obsolete, {}, dropped};
  for (size_t i = 0; i < layout.services.size(); ++i) {
    // Down servers are skipped: scrub collects what is left there.
    item.services.push_back(layout.IsUp(i) ? layout.services[i] : nullptr);
  }
  queue_.Push(std::move(item));
}

void VersionCollector::Drain() { queue_.Drain(); }

void VersionCollector::Collect(std::vector<Item> items) {
  // One batch per server: (item, chunk index) pairs, run back to back.
  std::map<ChunkService*, std::vector<std::pair<size_t, uint32_t>>> batches;
  for (size_t j = 0; j < items.size(); ++j) {
    for (uint32_t i = 0; i < items[j].services.size(); ++i) {
      if (items[j].services[i] != nullptr)
        batches[items[j].services[i]].emplace_back(j, i);
    }
  }
  std::vector<std::function<void()>> tasks;
  for (auto& [svc, batch] : batches) {
    tasks.push_back([this, &items, svc = svc, &batch = batch] {
      DeleteBatch(svc, items, batch);
    });
  }
  p_.pool->RunAll(std::move(tasks));
}

void VersionCollector::DeleteBatch(
    ChunkService* svc, const std::vector<Item>& items,
    const std::vector<std::pair<size_t, uint32_t>>& batch) {
  std::vector<ChunkVersion> chunks;
  chunks.reserve(batch.size());
  for (const auto& [j, i] : batch) {
    const ObsoleteStripe& o = items[j].stripe;
    chunks.push_back({{o.inode, o.stripe, i}, o.version});
  }
  Status st = svc->DeleteChunkVersions(chunks);
  if (st.code() == EOPNOTSUPP) {
    // No exact deletes there: one by one, with the fallback for dropped
    // stripes.
    for (const auto& [j, i] : batch) DeleteOne(items[j], i);
    return;
  }
  ClientCounters::Add(
      st.ok() ? p_.counters->gc_chunk_deletes : p_.counters->gc_errors,
      batch.size());
}

void VersionCollector::DeleteOne(const Item& item, uint32_t index) {
  const ObsoleteStripe& o = item.stripe;
  const ChunkId id{o.inode, o.stripe, index};
  ChunkService* svc = item.services[index];
  Status st = svc->DeleteChunkVersion(id, o.version);
  if (st.code() == EOPNOTSUPP && item.dropped) {
    // A store without exact deletes: every version is garbage if the stripe
    // is still absent (checked under this client's stripe lock, so a write
    // of ours cannot recreate it in between).
    std::lock_guard<std::mutex> lock(p_.locks->For(o.inode, o.stripe));
    auto now = p_.meta->GetStripes(o.inode, o.stripe, 1);
    if (now.ok() && now->empty()) st = svc->DeleteChunk(id, 0);
  }
  ClientCounters::Add(st.ok() ? p_.counters->gc_chunk_deletes
                              : p_.counters->gc_errors);
}

}  // namespace stripefs

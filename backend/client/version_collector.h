// VersionCollector: deletes the chunks of replaced and dropped stripe
// versions in the background, off the write path.
//
// Writers hand over what a commit made obsolete (Enqueue) and return at
// once. One collector thread (a BackgroundQueue) takes everything queued,
// groups the deletions
// by chunk server and sends each server's batch as one DeleteChunkVersions
// call on the I/O pool (servers in parallel; one request per frame-full and
// one index commit on the server), deleting exactly the obsolete (inode,
// stripe, index, version): never "all but the newest", so a newer version
// committed meanwhile is never touched.
//
// Batched over time: once something is queued, the thread lingers up to
// `linger` (unless the queue is half full, or someone drains or stops) so
// that the obsolete versions of several commits share one delete request
// and one index commit per server, instead of each fsync's deletes taking
// their own index sync on every server right behind its writes.
//
// Bounded: at most `capacity` stripes wait; Enqueue blocks while the queue
// is full (memory stays bounded when servers are slow). Drain() waits until
// everything enqueued so far is done; the destructor drains, then stops.
//
// Crash: a version whose deletion was queued but not run is an orphan chunk
// (no committed stripe references it). Scrub counts such orphans and
// `stripefs repair --scrub --delete-orphans` removes them; nothing readable
// depends on them, so losing the queue loses only space.
//
// Ownership: borrows the pool, view, metadata, locks and counters.
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/client/background_queue.h"
#include "backend/client/client_counters.h"
#include "backend/client/cluster_view.h"
#include "backend/client/stripe_locks.h"
#include "backend/client/thread_pool.h"
#include "backend/meta/meta_service.h"

namespace stripefs {

class VersionCollector {
 public:
  struct Parts {
    MetaService* meta;
    ClusterView* view;
    ThreadPool* pool;
    StripeLocks* locks;
    ClientCounters* counters;
  };
  VersionCollector(const Parts& parts, size_t capacity,
                   std::chrono::milliseconds linger = {});
  // The queue's destructor drains it, then stops the thread.
  VersionCollector(const VersionCollector&) = delete;
  VersionCollector& operator=(const VersionCollector&) = delete;

  // Queues the chunks of `obsolete` (version 0 entries are skipped) on the
  // servers `layout` names. `dropped`: the stripes no longer exist in
  // metadata (truncate, purge); a server without DeleteChunkVersion then
  // gets DeleteChunk(id, 0) if the stripe is still absent.
  void Enqueue(const ObsoleteStripe& obsolete, const ChunkLayout& layout,
               bool dropped);
  // Returns once everything enqueued before the call has been attempted.
  void Drain();

 private:
  struct Item {
    ObsoleteStripe stripe;
    std::vector<ChunkService*> services;  // per chunk index; null = skip
    bool dropped = false;
  };
  void Collect(std::vector<Item> items);
  // One server's share: (item, chunk index) pairs.
  void DeleteBatch(ChunkService* svc, const std::vector<Item>& items,
                   const std::vector<std::pair<size_t, uint32_t>>& batch);
  void DeleteOne(const Item& item, uint32_t index);

  const Parts p_;
  BackgroundQueue<Item> queue_;  // last: its thread uses the fields above
};

}  // namespace stripefs

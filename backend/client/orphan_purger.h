// OrphanPurger: removes unlinked inodes (link count 0, no references left)
// in the background, chunks first and metadata last, so that unlink and the
// last close return after their metadata change only.
//
// Order and crash safety: for the orphans queued together, the purger reads
// each one's stripe map, hands every committed stripe version to the
// StripeClient's version collector (one DeleteChunkVersions per server for
// the whole group), waits until those deletes were attempted, and only then
// calls PurgeInode for each. The orphan inode is the durable purge record:
// after a crash before PurgeInode it is still in ListOrphans, and the next
// mount queues it again (deleting absent chunks is OK), so no chunk leaks
// for good. A chunk of a linked file is never deleted: an inode is skipped
// unless its link count is 0, and only the versions its own map names go.
// Known limit: chunks on servers that are down are left to scrub, as the
// collector documents.
//
// Ownership: borrows the metadata service, the stripe client and the two
// counters (all must outlive it). Thread-safety: all methods may be called
// concurrently. The destructor purges what is queued, then stops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/client/stripe_client.h"
#include "backend/meta/meta_service.h"

namespace stripefs {

class OrphanPurger {
 public:
  struct Parts {
    MetaService* meta;
    StripeClient* client;
    std::atomic<uint64_t>* purged;  // inodes removed
    std::atomic<uint64_t>* errors;  // metadata errors (the orphan stays)
  };
  explicit OrphanPurger(const Parts& parts);
  ~OrphanPurger();
  OrphanPurger(const OrphanPurger&) = delete;
  OrphanPurger& operator=(const OrphanPurger&) = delete;

  // Queues `ino` (an inode queued twice is purged once; the second finds it
  // gone).
  void Enqueue(uint64_t ino);
  // Returns once everything queued before the call has been attempted.
  void Drain();

 private:
  void Loop();
  // Chunks of every orphan in `inos`, then their metadata.
  void PurgeGroup(const std::vector<uint64_t>& inos);
  // The committed stripes of orphan `ino` (false: skip it, e.g. linked).
  bool ListOrphanStripes(uint64_t ino, std::vector<ObsoleteStripe>* out);

  const Parts p_;
  std::mutex mu_;
  std::condition_variable cv_;  // queue changed or done_ advanced
  std::deque<uint64_t> queue_;  // guarded by mu_
  uint64_t enqueued_ = 0;       // guarded by mu_
  uint64_t done_ = 0;           // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::thread thread_;          // last: started after the fields above
};

}  // namespace stripefs

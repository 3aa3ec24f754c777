// OrphanPurger: removes unlinked inodes (link count 0, no references left)
// in the background, chunks first and metadata last, so that unlink and the
// last close return after their metadata change only.
//
// Order and crash safety: for the orphans queued together, the purger lists
// their stripe maps with one ListOrphanStripes call, which also makes
// metadata durable before it answers when it lists stripes (the unlink that
// orphaned an inode may have been acknowledged before its WAL sync, and must
// not be lost once its chunks are gone; a group of empty files needs no
// sync: nothing is deleted); against a metad without it, GetAttr and
// GetStripes per inode and then MetaService::Sync. Stripes that only the
// purge returns (committed after the listing) go after a Sync. It hands every
// committed stripe version to the StripeClient's version collector (one
// DeleteChunkVersions per server for the whole group; nothing for empty files),
// waits until those deletes were attempted, and only then removes their
// metadata with one PurgeInodes call (one metad commit for the group; per-inode
// PurgeInode against a metad without it). So a group costs two metadata calls
// however many inodes it holds. The orphan inode is the durable purge record:
// after a crash before that commit it is still in ListOrphans, and the next
// mount queues it again (deleting absent chunks is OK), so no chunk leaks
// for good. A chunk of a linked file is never deleted: an inode is skipped
// unless its link count is 0, and only the versions its own map names go.
// Known limit: chunks on servers that are down are left to scrub, as the
// collector documents.
//
// Batched over time: once an orphan is queued the thread lingers up to
// kLinger for more (as the version collector does), so that a stream of
// unlinks makes few large groups rather than many small ones.
//
// Bounded: at most kQueueCapacity inodes wait (a BackgroundQueue); Enqueue
// then blocks until the purger has taken a group. It blocks rather than
// coalesces because every queued inode is a distinct orphan whose chunks
// must go (an inode is queued once per last reference, so there is nothing
// to merge), and dropping one would leave it until the next mount; blocking
// slows unlinks to the purge rate instead of letting the queue grow.
//
// Ownership: borrows the metadata service, the stripe client and the two
// counters (all must outlive it). Thread-safety: all methods may be called
// concurrently. The destructor purges what is queued, then stops.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/client/background_queue.h"
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
    // Test hook: called after a group's chunk deletes were attempted and
    // before its metadata goes, the window a crash leaves orphans whose
    // chunks are gone (a test kills the process there). Unset in production.
    std::function<void()> after_chunk_deletes = nullptr;
  };
  // Inodes that may wait, and inodes per group (one PurgeInodes call and
  // one DeleteChunkVersions per server).
  static constexpr size_t kQueueCapacity = 4096;
  static constexpr size_t kGroup = 256;
  // How long the thread waits after the first queued orphan for more to
  // join its group (cut short by Drain, a half-full queue or the
  // destructor): each group costs a metad WAL sync (in ListOrphanStripes),
  // and groups of two or three orphans made one fsync per few unlinks.
  static constexpr std::chrono::milliseconds kLinger{50};
  static_assert(kGroup <= kMaxInodesPerPurge);

  explicit OrphanPurger(const Parts& parts);
  OrphanPurger(const OrphanPurger&) = delete;
  OrphanPurger& operator=(const OrphanPurger&) = delete;

  // Queues `ino` (an inode queued twice is purged once; the second finds it
  // gone). Blocks while kQueueCapacity inodes wait.
  void Enqueue(uint64_t ino) { queue_.Push(ino); }
  // Returns once everything queued before the call has been attempted.
  void Drain() { queue_.Drain(); }

 private:
  // Chunks of every orphan in `inos`, then their metadata.
  void PurgeGroup(const std::vector<uint64_t>& inos);
  // The orphans among `inos` and their committed stripes, durable (false:
  // nothing may be deleted, errors counted).
  bool ListGroup(const std::vector<uint64_t>& inos,
                 std::vector<uint64_t>* orphans,
                 std::vector<ObsoleteStripe>* stripes);
  // The committed stripes of orphan `ino` by GetAttr and paged GetStripes
  // (false: skip it, e.g. linked).
  bool ListOneOrphan(uint64_t ino, std::vector<ObsoleteStripe>* out);
  // Removes the metadata of `orphans`; returns stripes that the purge
  // dropped (the listing normally saw them all).
  std::vector<ObsoleteStripe> PurgeMetadata(
      const std::vector<uint64_t>& orphans);

  const Parts p_;
  BackgroundQueue<uint64_t> queue_;  // last: its thread uses p_
};

}  // namespace stripefs

// VersionReservation: the stripe versions one MetaStore hands out.
//
// Versions are reserved in batches by a write of M version_limit, the
// limit every MetaStore of the volume shares, and handed out only once that
// write is durable: after a crash a MetaStore resumes at the stored limit,
// so no version is handed out twice, by one metad or by two. A reservation
// that finds the stored limit moved (another MetaStore reserved meanwhile)
// skips the rest of its own range.
//
// Ownership: borrows the KvStore, which must outlive it.
// Thread-safety: thread-compatible; MetaStore keeps it GUARDED_BY its mu_.
// Durability: Take returns the ticket of the write that reserved the
// versions; the caller waits for it (KvStore::WaitDurable, without its
// lock) before it hands them out.
#pragma once

#include <cstdint>

#include "backend/meta/kv_store.h"
#include "common/status.h"

namespace stripefs {

class VersionReservation {
 public:
  // `batch`: versions reserved beyond what a Take needs.
  VersionReservation(KvStore* kv, uint32_t batch);

  // Resumes at the durable limit read at open: versions below it may have
  // been handed out before a restart.
  void Resume(uint64_t stored_limit);

  struct Grant {
    uint64_t first = 0;   // `count` versions from here
    uint64_t ticket = 0;  // wait for this before handing them out
  };
  // `count` (> 0) fresh versions, reserving a batch first when the range
  // is used up. EOVERFLOW when the volume's versions are exhausted.
  Result<Grant> Take(uint32_t count);

  // EINVAL unless `version` was handed out by Take, here or by another
  // MetaStore of the volume (then it lies below the stored limit).
  Status CheckAllocated(uint64_t version);

 private:
  KvStore* const kv_;
  const uint64_t batch_;
  // [next_, limit_) is durably reserved and not yet handed out.
  uint64_t next_ = 0;
  uint64_t limit_ = 0;
  uint64_t limit_ticket_ = 0;  // commit ticket of the last reservation
};

}  // namespace stripefs

#include "backend/meta/inode_lease.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "backend/meta/kv_retry.h"
#include "backend/meta/meta_schema.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)

InodeLease::InodeLease(KvStore* kv, uint32_t batch)
    : kv_(kv), batch_(std::max<uint32_t>(batch, 1)) {}

Result<uint64_t> InodeLease::Take(std::atomic<uint64_t>* conflicts) {
  if (next_ < limit_) return next_++;
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<KvTxn> txn = kv_->Begin();
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              txn->Get(MetaKey(kMetaNextInode)));
    if (!v) return Status::Corruption("inode counter is missing");
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t start, DecodeU64(*v));
    if (start > std::numeric_limits<uint64_t>::max() - batch_) {
      return Status(EOVERFLOW, "inode numbers exhausted");
    }
    txn->Put(MetaKey(kMetaNextInode), EncodeU64(start + batch_));
    auto ticket = txn->Commit();
    if (ticket.status().code() == kKvConflict && attempt < kKvMaxAttempts) {
      conflicts->fetch_add(1, std::memory_order_relaxed);
      KvBackOff(attempt);
      continue;
    }
    STRIPEFS_RETURN_IF_ERROR(ticket.status());
    next_ = start;
    limit_ = start + batch_;
    return next_++;
  }
}

void InodeLease::GiveBack(uint64_t ino) {
  if (ino + 1 == next_) next_--;
}

}  // namespace stripefs

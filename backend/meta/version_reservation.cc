#include "backend/meta/version_reservation.h"

#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "backend/meta/kv_retry.h"
#include "backend/meta/meta_schema.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)

VersionReservation::VersionReservation(KvStore* kv, uint32_t batch)
    : kv_(kv), batch_(batch) {}

void VersionReservation::Resume(uint64_t stored_limit) {
  limit_ = stored_limit;
  next_ = stored_limit;
}

Result<VersionReservation::Grant> VersionReservation::Take(uint32_t count) {
  if (next_ > std::numeric_limits<uint64_t>::max() - count - batch_) {
    return Status(EOVERFLOW, "stripe version numbers exhausted");
  }
  if (next_ + count > limit_) {
    // Reserve a batch durably before handing any of it out; after a crash
    // LoadState resumes at the reserved limit, so nothing is reused. The
    // stored limit is shared by every MetaStore of the volume: if another
    // one reserved since, this one's rest is skipped.
    for (int attempt = 1;; ++attempt) {
      std::unique_ptr<KvTxn> txn = kv_->Begin();
      STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                                txn->Get(MetaKey(kMetaVersionLimit)));
      if (!v) return Status::Corruption("version counter is missing");
      STRIPEFS_ASSIGN_OR_RETURN(uint64_t stored, DecodeU64(*v));
      const uint64_t start = stored == limit_ ? next_ : stored;
      if (start > std::numeric_limits<uint64_t>::max() - count - batch_) {
        return Status(EOVERFLOW, "stripe version numbers exhausted");
      }
      uint64_t limit = start + count + batch_;
      txn->Put(MetaKey(kMetaVersionLimit), EncodeU64(limit));
      auto ticket = txn->Commit();
      if (ticket.status().code() == kKvConflict && attempt < kKvMaxAttempts) {
        KvBackOff(attempt);
        continue;
      }
      STRIPEFS_RETURN_IF_ERROR(ticket.status());
      next_ = start;
      limit_ = limit;
      limit_ticket_ = *ticket;
      break;
    }
  }
  Grant g{next_, limit_ticket_};
  next_ += count;
  return g;
}

Status VersionReservation::CheckAllocated(uint64_t version) {
  // Versions below next_ were handed out here or by another MetaStore of
  // the volume; [next_, limit_) is reserved here but not handed out;
  // others reserve below the stored limit.
  bool allocated = version < next_;
  if (!allocated && version >= limit_) {
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              kv_->Get(MetaKey(kMetaVersionLimit)));
    if (!v) return Status::NotFound("version counter does not exist");
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t stored, DecodeU64(*v));
    allocated = version < stored;
  }
  if (!allocated) {
    return Status::InvalidArgument("stripe version " + std::to_string(version) +
                                   " was never allocated (AllocateVersions)");
  }
  return Status::Ok();
}

}  // namespace stripefs

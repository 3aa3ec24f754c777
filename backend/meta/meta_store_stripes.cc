// MetaStore's stripe map: handing out stripe versions (reserved durably
// first: version_reservation.h), stripe commits with compare-and-set on the
// expected version, dropping ranges of stripes, missing-chunk masks and the
// volume-wide listing the scrubber and repairer page through. Every change
// here is durable when it returns: chunks are written or deleted on its
// strength.
#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <set>

#include "backend/meta/meta_store.h"
#include "backend/meta/meta_store_mutation.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)
using meta_internal::InoStr;
using meta_internal::IsDir;
using meta_internal::IsReg;
using meta_internal::SnapshotReader;

Status MetaStore::DropStripesFrom(Mutation& m, uint64_t ino,
                                  uint64_t first_dropped,
                                  std::vector<ObsoleteStripe>* obsolete,
                                  uint64_t end_stripe) {
  const std::string start = StripeKey(ino, first_dropped);
  const std::string end = end_stripe == std::numeric_limits<uint64_t>::max()
                              ? PrefixEnd(StripePrefix(ino))
                              : StripeKey(ino, end_stripe);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> stripes,
                            m.txn().Scan(start, end, 0));
  for (const KvPair& p : stripes) {
    STRIPEFS_ASSIGN_OR_RETURN(StripeRef ref, ParseStripe(p.key, p.value));
    if (obsolete) obsolete->push_back({ino, ref.sv.stripe, ref.sv.version});
  }
  // One operation however many stripes the file has.
  if (!stripes.empty()) m.txn().DeleteRange(start, end);
  return Status::Ok();
}

Status MetaStore::DropStripes(uint64_t ino, uint64_t first, uint64_t count,
                              std::vector<ObsoleteStripe>* obsolete) {
  return DropStripesImpl(ino, first, count, /*stamp=*/true, obsolete);
}

Status MetaStore::DropStripesKeepTimes(uint64_t ino, uint64_t first,
                                       uint64_t count,
                                       std::vector<ObsoleteStripe>* obsolete) {
  return DropStripesImpl(ino, first, count, /*stamp=*/false, obsolete);
}

Status MetaStore::DropStripesImpl(uint64_t ino, uint64_t first, uint64_t count,
                                  bool stamp,
                                  std::vector<ObsoleteStripe>* obsolete) {
  if (count == 0 || first > std::numeric_limits<uint64_t>::max() - count) {
    return Status::InvalidArgument("stripe range out of bounds");
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    if (!IsReg(rec->attr.mode)) {
      return Status::InvalidArgument(InoStr(ino) + " is not a regular file");
    }
    std::vector<ObsoleteStripe> dropped;
    STRIPEFS_RETURN_IF_ERROR(
        DropStripesFrom(m, ino, first, &dropped, first + count));
    if (stamp) rec->attr.mtime = rec->attr.ctime = m.now();
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    if (obsolete)
      obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
    return Status::Ok();
  });
}

Result<uint64_t> MetaStore::AllocateVersions(uint32_t count) {
  if (count == 0) return Status::InvalidArgument("AllocateVersions(0)");
  VersionReservation::Grant grant;
  {
    MutexLock lock(&mu_);
    STRIPEFS_ASSIGN_OR_RETURN(grant, versions_.Take(count));
  }
  // Only the reservation must be durable (even with options_.sync off:
  // reusing a version after a crash would make two versions of a stripe
  // indistinguishable); other mutations' writes need not be waited for.
  STRIPEFS_RETURN_IF_ERROR(kv_->WaitDurable(grant.ticket));
  return grant.first;
}

Result<std::vector<StripeVersion>> MetaStore::GetStripes(uint64_t ino,
                                                         uint64_t first,
                                                         uint64_t count) {
  SnapshotReader r(kv_.get());
  STRIPEFS_RETURN_IF_ERROR(r.Inode(ino).status());
  std::vector<StripeVersion> out;
  if (count == 0) return out;
  std::string end = first > std::numeric_limits<uint64_t>::max() - count
                        ? PrefixEnd(StripePrefix(ino))
                        : StripeKey(ino, first + count);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> stripes,
                            r.Range(StripeKey(ino, first), end));
  for (const KvPair& p : stripes) {
    STRIPEFS_ASSIGN_OR_RETURN(StripeRef ref, ParseStripe(p.key, p.value));
    out.push_back(ref.sv);
  }
  return out;
}

Status MetaStore::ValidateStripeCommit(const StripeCommit& c) const {
  const StripeVersion& sv = c.sv;
  const uint32_t width = geometry_.k + geometry_.m;
  if (sv.version == 0 || sv.version == c.expected_version) {
    return Status::InvalidArgument("CommitStripe needs a fresh version (got " +
                                   std::to_string(sv.version) + ", expected " +
                                   std::to_string(c.expected_version) + ")");
  }
  if ((width < 32 && (sv.missing_mask >> width) != 0) ||
      static_cast<uint32_t>(std::popcount(sv.missing_mask)) > geometry_.m) {
    return Status::InvalidArgument(
        "missing mask " + std::to_string(sv.missing_mask) +
        " is impossible for a " + std::to_string(geometry_.k) + "+" +
        std::to_string(geometry_.m) +
        " stripe (more than m chunks missing "
        "or bits past k+m)");
  }
  if (sv.chunk_len > geometry_.cell_size) {
    return Status::InvalidArgument(
        "chunk length " + std::to_string(sv.chunk_len) +
        " is larger than the cell size " + std::to_string(geometry_.cell_size));
  }
  if (sv.stripe >=
      std::numeric_limits<uint64_t>::max() / geometry_.stripe_size()) {
    return Status::InvalidArgument("stripe number " +
                                   std::to_string(sv.stripe) + " is too large");
  }
  return Status::Ok();
}

Status MetaStore::CommitStripe(uint64_t ino, const StripeVersion& sv,
                               uint64_t expected_version,
                               uint64_t min_file_size,
                               ObsoleteStripe* obsolete) {
  if (obsolete) *obsolete = ObsoleteStripe{ino, sv.stripe, 0};
  std::vector<ObsoleteStripe> replaced;
  STRIPEFS_RETURN_IF_ERROR(CommitStripes(
      ino, {StripeCommit{sv, expected_version}}, min_file_size, &replaced));
  if (obsolete) *obsolete = replaced.at(0);
  return Status::Ok();
}

Status MetaStore::CommitStripes(uint64_t ino,
                                const std::vector<StripeCommit>& commits,
                                uint64_t min_file_size,
                                std::vector<ObsoleteStripe>* obsolete) {
  return CommitStripesImpl(ino, commits, min_file_size, /*stamp=*/true,
                           obsolete);
}

Status MetaStore::CommitStripesKeepTimes(
    uint64_t ino, const std::vector<StripeCommit>& commits,
    uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete) {
  return CommitStripesImpl(ino, commits, min_file_size, /*stamp=*/false,
                           obsolete);
}

Status MetaStore::CommitStripesImpl(uint64_t ino,
                                    const std::vector<StripeCommit>& commits,
                                    uint64_t min_file_size, bool stamp,
                                    std::vector<ObsoleteStripe>* obsolete) {
  if (obsolete) obsolete->clear();
  if (commits.empty()) return Status::InvalidArgument("no stripes to commit");
  if (commits.size() > kMaxStripesPerCommit) {
    return Status::InvalidArgument(
        std::to_string(commits.size()) + " stripes in one commit, at most " +
        std::to_string(kMaxStripesPerCommit) + "; split the commit");
  }
  std::set<uint64_t> seen;
  uint64_t last = 0;
  for (const StripeCommit& c : commits) {
    STRIPEFS_RETURN_IF_ERROR(ValidateStripeCommit(c));
    if (!seen.insert(c.sv.stripe).second) {
      return Status::InvalidArgument("stripe " + std::to_string(c.sv.stripe) +
                                     " appears twice in one commit");
    }
    last = std::max(last, c.sv.stripe);
  }
  if (min_file_size > (last + 1) * geometry_.stripe_size()) {
    return Status::InvalidArgument(
        "min_file_size " + std::to_string(min_file_size) +
        " lies beyond the end of stripe " + std::to_string(last));
  }
  // An engine that bounds transactions gets groups that fit (a stripe is
  // one write and one read, plus the inode and statistics records).
  const size_t max_ops = kv_->limits().max_ops;
  const size_t group =
      max_ops == 0 ? commits.size() : std::max<size_t>(1, max_ops / 2);
  std::vector<ObsoleteStripe> replaced;
  for (size_t i = 0; i < commits.size(); i += group) {
    const size_t n = std::min(group, commits.size() - i);
    const bool last_group = i + n == commits.size();
    STRIPEFS_RETURN_IF_ERROR(CommitStripeGroup(
        ino, &commits[i], n, last_group ? min_file_size : 0, stamp, &replaced));
  }
  if (obsolete) *obsolete = std::move(replaced);
  return Status::Ok();
}

Status MetaStore::CommitStripeGroup(uint64_t ino, const StripeCommit* commits,
                                    size_t n, uint64_t min_file_size,
                                    bool stamp,
                                    std::vector<ObsoleteStripe>* replaced) {
  const size_t replaced_before = replaced->size();
  return Mutate([&]() -> Status {
    mu_.AssertHeld();  // Mutate runs this under mu_ (versions_)
    replaced->resize(replaced_before);
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    InodeAttr& a = rec->attr;
    if (!IsReg(a.mode)) {
      return Status(IsDir(a.mode) ? EISDIR : EINVAL,
                    InoStr(ino) + " is not a regular file");
    }
    for (size_t i = 0; i < n; ++i) {
      const StripeCommit& c = commits[i];
      const StripeVersion& sv = c.sv;
      STRIPEFS_RETURN_IF_ERROR(versions_.CheckAllocated(sv.version));
      std::string key = StripeKey(ino, sv.stripe);
      STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v, m.txn().Get(key));
      StripeVersion cur;
      if (v) STRIPEFS_RETURN_IF_ERROR(DecodeStripeValue(*v, &cur));
      if (cur.version != c.expected_version) {
        return Status(ESTALE,
                      "stripe " + std::to_string(sv.stripe) + " of " +
                          InoStr(ino) + " is at version " +
                          std::to_string(cur.version) + ", not " +
                          std::to_string(c.expected_version) +
                          " (someone else committed; re-read and retry)");
      }
      m.txn().Put(key,
                  EncodeStripeValue(sv.version, sv.missing_mask, sv.chunk_len));
      replaced->push_back(ObsoleteStripe{ino, sv.stripe, cur.version});
    }
    if (min_file_size > a.size) {
      m.stats().bytes_used += min_file_size - a.size;
      a.size = min_file_size;
    }
    if (stamp) a.mtime = a.ctime = m.now();
    return m.Commit();
  });
}

Status MetaStore::SetStripeMissing(uint64_t ino, uint64_t stripe,
                                   uint64_t version, uint32_t missing_mask) {
  const uint32_t width = geometry_.k + geometry_.m;
  if (width < 32 && (missing_mask >> width) != 0) {
    return Status::InvalidArgument("missing mask has bits past k+m");
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    std::string key = StripeKey(ino, stripe);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v, m.txn().Get(key));
    StripeVersion cur;
    if (v) STRIPEFS_RETURN_IF_ERROR(DecodeStripeValue(*v, &cur));
    if (cur.version != version) {
      return Status(ESTALE, "stripe " + std::to_string(stripe) + " of " +
                                InoStr(ino) + " is at version " +
                                std::to_string(cur.version) + ", not " +
                                std::to_string(version));
    }
    if (cur.missing_mask == missing_mask) return Status::Ok();
    m.txn().Put(key, EncodeStripeValue(version, missing_mask, cur.chunk_len));
    return m.Commit();
  });
}

Result<std::vector<StripeRef>> MetaStore::ListStripes(uint64_t after_inode,
                                                      uint64_t after_stripe,
                                                      uint32_t limit) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  std::vector<StripeRef> out;
  std::string start;
  if (after_stripe != kMax) {
    start = StripeKey(after_inode, after_stripe + 1);
  } else if (after_inode != kMax) {
    start = StripeKey(after_inode + 1, 0);
  } else {
    return out;
  }
  SnapshotReader r(kv_.get());
  if (limit == 0) return out;
  STRIPEFS_ASSIGN_OR_RETURN(
      std::vector<KvPair> stripes,
      r.Range(start, PrefixEnd(std::string(1, kPrefixStripe)), limit));
  for (const KvPair& p : stripes) {
    STRIPEFS_ASSIGN_OR_RETURN(StripeRef ref, ParseStripe(p.key, p.value));
    out.push_back(ref);
  }
  return out;
}

}  // namespace stripefs

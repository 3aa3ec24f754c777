// MetaStore: orphans (inodes with no name left: unlinked while open,
// O_TMPFILE, removed directories) and their purge, which deletes the inode
// and hands its stripes back for chunk deletion. Listing an orphan's
// stripes syncs the WAL first, so no chunk goes before its unlink is
// durable.
#include <algorithm>
#include <optional>

#include "backend/meta/meta_store.h"
#include "backend/meta/meta_store_mutation.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)
using meta_internal::InoStr;
using meta_internal::SnapshotReader;

Status MetaStore::PurgeInode(uint64_t ino,
                             std::vector<ObsoleteStripe>* obsolete) {
  std::vector<ObsoleteStripe> dropped;
  return MutateNamespace([&]() -> Status {
    dropped.clear();
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Inode(ino));
    if (rec->attr.nlink != 0) {
      return Status(EBUSY, InoStr(ino) + " still has " +
                               std::to_string(rec->attr.nlink) + " link(s)");
    }
    STRIPEFS_RETURN_IF_ERROR(DropStripesFrom(m, ino, 0, &dropped));
    STRIPEFS_RETURN_IF_ERROR(m.DeleteInode(ino));
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    if (obsolete)
      obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
    return Status::Ok();
  });
}

Status MetaStore::PurgeOne(Mutation& m, uint64_t ino,
                           std::vector<ObsoleteStripe>* dropped) {
  const size_t before = dropped->size();
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Inode(ino));
  if (rec->attr.nlink != 0) {
    return Status(EBUSY, InoStr(ino) + " still has " +
                             std::to_string(rec->attr.nlink) + " link(s)");
  }
  // DropStripesFrom writes only after its reads succeeded.
  Status st = DropStripesFrom(m, ino, 0, dropped);
  if (!st.ok()) {
    dropped->resize(before);
    return st;
  }
  return m.DeleteInode(ino);  // cannot fail: the record is loaded
}

namespace {
// Transaction writes per purged inode: the inode, symlink and orphan keys,
// the xattr range and the stripe range (see PurgeOne). The estimate is
// doubled for the reads an engine may also bound (etcd compares).
constexpr size_t kPurgeOpsPerInode = 5;
}  // namespace

Status MetaStore::PurgeInodes(const std::vector<uint64_t>& inos,
                              std::vector<int32_t>* codes,
                              std::vector<ObsoleteStripe>* obsolete) {
  codes->clear();
  if (inos.size() > kMaxInodesPerPurge) return TooManyToPurge(inos.size());
  const size_t max_ops = kv_->limits().max_ops;
  const size_t group =
      max_ops == 0
          ? std::max<size_t>(1, inos.size())
          : std::max<size_t>(1, (max_ops - 1) / (2 * kPurgeOpsPerInode));
  std::vector<int32_t> out(inos.size(), 0);
  std::vector<ObsoleteStripe> dropped;
  for (size_t i = 0; i < inos.size(); i += group) {
    const size_t n = std::min(group, inos.size() - i);
    STRIPEFS_RETURN_IF_ERROR(PurgeInodeGroup(&inos[i], n, &out[i], &dropped));
  }
  *codes = std::move(out);
  if (obsolete)
    obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
  return Status::Ok();
}

Status MetaStore::PurgeInodeGroup(const uint64_t* inos, size_t n,
                                  int32_t* codes,
                                  std::vector<ObsoleteStripe>* dropped) {
  const size_t before = dropped->size();
  return MutateNamespace([&]() -> Status {
    dropped->resize(before);
    Mutation m(this);
    for (size_t i = 0; i < n; ++i)
      codes[i] = PurgeOne(m, inos[i], dropped).code();
    Status st = m.Commit();
    if (!st.ok()) dropped->resize(before);
    return st;
  });
}

Status MetaStore::ListOrphanStripes(const std::vector<uint64_t>& inos,
                                    std::vector<int32_t>* codes,
                                    std::vector<ObsoleteStripe>* stripes) {
  codes->clear();
  if (inos.size() > kMaxInodesPerPurge) return TooManyToPurge(inos.size());
  std::vector<int32_t> out(inos.size(), 0);
  std::vector<ObsoleteStripe> found;
  // Some listed orphan has chunks the caller will delete (or too many to
  // list here: it pages them with GetStripes and deletes them).
  bool chunks_to_delete = false;
  {
    SnapshotReader r(kv_.get());
    for (size_t i = 0; i < inos.size(); ++i) {
      const uint64_t ino = inos[i];
      auto rec = r.Inode(ino);
      if (!rec.ok()) {
        out[i] = rec.status().code();
        continue;
      }
      if (rec->attr.nlink != 0) {
        out[i] = EBUSY;
        continue;
      }
      // One more than the room left tells "too many" without reading all.
      const size_t room = kMaxOrphanStripes - found.size();
      const std::string prefix = StripePrefix(ino);
      auto pairs = r.Range(prefix, PrefixEnd(prefix), room + 1);
      if (!pairs.ok()) {
        out[i] = pairs.status().code();
        continue;
      }
      if (pairs->size() > room) {
        out[i] = E2BIG;  // still an orphan: its unlink is synced below
        chunks_to_delete = true;
        continue;
      }
      const size_t before = found.size();
      for (const KvPair& p : *pairs) {
        auto ref = ParseStripe(p.key, p.value);
        if (!ref.ok()) {
          out[i] = ref.status().code();
          break;
        }
        found.push_back({ino, ref->sv.stripe, ref->sv.version});
      }
      if (out[i] != 0) {
        found.resize(before);
        continue;
      }
      if (found.size() > before) chunks_to_delete = true;
    }
  }
  // The unlinks that made these orphans may have been acknowledged before
  // their WAL sync: make them durable before anyone deletes chunks. Orphans
  // without stripes (empty files: every unlink of `bench write` row f) need
  // no sync: nothing is deleted on their strength, and their purge commit
  // comes after their unlink in the one WAL, so a crash can lose the purge
  // (the orphan is queued again at the next mount) or both, never the
  // unlink alone.
  if (chunks_to_delete) STRIPEFS_RETURN_IF_ERROR(Sync());
  *codes = std::move(out);
  stripes->insert(stripes->end(), found.begin(), found.end());
  return Status::Ok();
}

Result<std::vector<uint64_t>> MetaStore::ListOrphans() {
  SnapshotReader r(kv_.get());
  std::string prefix(1, kPrefixOrphan);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> orphans,
                            r.Range(prefix, PrefixEnd(prefix)));
  std::vector<uint64_t> out;
  for (const KvPair& p : orphans) {
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t ino, ParseOrphanIno(p.key));
    out.push_back(ino);
  }
  return out;
}

}  // namespace stripefs

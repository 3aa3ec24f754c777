// MetaService: the metadata operations of a stripefs volume.
//
// Holds the namespace (inodes, directory entries, xattrs), the stripe map
// (committed version and degraded mask of each stripe), the volume geometry
// and the cluster map. Implemented in process by MetaStore (RocksDB) and
// remotely by the RPC client stub. Every acknowledged mutation is durable,
// except namespace mutations of a metad that acknowledges them before its
// WAL sync (then durable after Sync(); see MetaStoreOptions).
//
// Errors are errno-style Statuses a file system can return as is: ENOENT,
// EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, EINVAL, ENODATA (xattr), ERANGE,
// ESTALE (stale version in CommitStripe), EHOSTDOWN (unreachable).
// Permission checks are NOT done here (the kernel does them with
// default_permissions); callers pass uid/gid/mode already decided.
//
// Thread-safety: every implementation is safe to call from many threads;
// each method is atomic.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/meta/meta_types.h"
#include "common/status.h"

namespace stripefs {

// Most inodes one PurgeInodes call may carry (bounds a decoded message).
inline constexpr size_t kMaxInodesPerPurge = 1024;
// Most stripes one ListOrphanStripes answer carries (24 bytes each on the
// wire: 1.5 MiB, far below an RPC payload's bound).
inline constexpr size_t kMaxOrphanStripes = 65536;

// Which calls of a MetaService may run on an RPC server's event-loop thread
// (RpcHandler::InlineSafe; backend/rpc/meta_inline_handler.h) because they
// return in microseconds without sleeping.
struct MetaInlineCaps {
  // Point reads, bounded range reads: served from this process's memory
  // (RocksDB memtable, block cache) or at worst one local SST read; never a
  // network round trip or a wait for another thread's I/O.
  bool reads = false;
  // Namespace mutations (MetaStoreOptions::namespace_sync_delay): they
  // return once written, before any WAL sync, and the engine's writes are
  // not stalled right now.
  bool namespace_writes = false;
};

class MetaService {
 public:
  virtual ~MetaService() = default;

  // See MetaInlineCaps; asked per request, so it must be cheap. Default:
  // nothing may run inline.
  virtual MetaInlineCaps InlineCapabilities() const { return {}; }

  // --- volume and cluster ---------------------------------------------------
  virtual Result<Geometry> GetGeometry() = 0;
  virtual Result<ClusterMap> GetClusterMap() = 0;
  // Adds or replaces the server with info.id; bumps the epoch.
  virtual Status UpsertServer(const ServerInfo& info) = 0;
  virtual Status SetServerState(uint32_t id, ServerState state) = 0;

  // --- namespace ------------------------------------------------------------
  virtual Result<InodeAttr> Lookup(uint64_t parent,
                                   const std::string& name) = 0;
  virtual Result<InodeAttr> GetAttr(uint64_t ino) = 0;
  // Size changes only here when shrinking/growing without data: stripes
  // wholly beyond the new size are dropped and returned in `obsolete` (their
  // chunks can be deleted). The caller (StripeClient) first rewrites the
  // partial last stripe so bytes past the new EOF read back as zeros.
  virtual Result<InodeAttr> SetAttr(uint64_t ino, const SetAttrRequest& req,
                                    std::vector<ObsoleteStripe>* obsolete) = 0;
  // Creates a regular file, device, fifo or socket (per mode's type bits).
  // An empty `name` with a regular-file mode makes an anonymous file
  // (O_TMPFILE): in no directory, nlink 0, an orphan until Link names it.
  virtual Result<InodeAttr> MkNode(uint64_t parent, const std::string& name,
                                   uint32_t mode, uint32_t uid, uint32_t gid,
                                   uint32_t rdev) = 0;
  virtual Result<InodeAttr> Mkdir(uint64_t parent, const std::string& name,
                                  uint32_t mode, uint32_t uid,
                                  uint32_t gid) = 0;
  virtual Result<InodeAttr> Symlink(uint64_t parent, const std::string& name,
                                    const std::string& target, uint32_t uid,
                                    uint32_t gid) = 0;
  virtual Result<std::string> ReadLink(uint64_t ino) = 0;
  // ENOENT for an orphan (nlink 0), except an anonymous file from MkNode
  // that was never linked (linkat of an O_TMPFILE): it gets its name and
  // stops being an orphan.
  virtual Result<InodeAttr> Link(uint64_t ino, uint64_t new_parent,
                                 const std::string& new_name) = 0;
  // Removes the entry. When the inode's link count drops to zero it becomes
  // an orphan (attributes and stripes kept, e.g. while still open) until
  // PurgeInode. Returns the inode's attributes after the unlink.
  virtual Result<InodeAttr> Unlink(uint64_t parent,
                                   const std::string& name) = 0;
  // One-call creates and unlinks, for a file system that would otherwise
  // read the parent around them (setgid, default ACL, the directory's new
  // attributes for the kernel's next GETATTR):
  //  - CreateEntry: MkNode (or, for an S_IFDIR mode, Mkdir) with
  //    req.flags (CreateEntryFlags) applied to the parent as read in the
  //    same transaction; returns the new inode and the parent after it.
  //    EINVAL for an empty name, a symlink or unknown flags.
  //  - UnlinkEntry: Unlink, returning the unlinked inode and the parent.
  // A service without them returns EOPNOTSUPP (the default; an older
  // metad does too); callers then use MkNode/Mkdir/Unlink.
  virtual Result<EntryChange> CreateEntry(const CreateEntryRequest& req) {
    (void)req;
    return Status::NotSupported("CreateEntry");
  }
  virtual Result<EntryChange> UnlinkEntry(uint64_t parent,
                                          const std::string& name) {
    (void)parent;
    (void)name;
    return Status::NotSupported("UnlinkEntry");
  }
  // The same for links and renames, so the caller learns both directories'
  // and the inode's attributes as committed (the kernel asks for them
  // next) without reading them again:
  //  - LinkEntry: Link, returning the inode and the new parent.
  //  - RenameEntry: Rename, returning RenameChange.
  virtual Result<EntryChange> LinkEntry(uint64_t ino, uint64_t new_parent,
                                        const std::string& new_name) {
    (void)ino;
    (void)new_parent;
    (void)new_name;
    return Status::NotSupported("LinkEntry");
  }
  virtual Result<RenameChange> RenameEntry(uint64_t parent,
                                           const std::string& name,
                                           uint64_t new_parent,
                                           const std::string& new_name,
                                           uint32_t flags) {
    (void)parent;
    (void)name;
    (void)new_parent;
    (void)new_name;
    (void)flags;
    return Status::NotSupported("RenameEntry");
  }
  // The removed directory stays an orphan (nlink 0) until PurgeInode, so
  // that open handles on it keep working.
  virtual Status Rmdir(uint64_t parent, const std::string& name) = 0;
  // flags: 0, RENAME_NOREPLACE (1), RENAME_EXCHANGE (2) or RENAME_WHITEOUT
  // (4, with or without NOREPLACE: the source name becomes a character
  // device 0/0, mode 0, owned like the moved inode) as in renameat2.
  // A replaced target is unlinked as by Unlink (orphaned when its link count
  // reaches zero; a replaced empty directory is orphaned as by Rmdir); its
  // inode number is returned through *replaced (0 if none).
  virtual Status Rename(uint64_t parent, const std::string& name,
                        uint64_t new_parent, const std::string& new_name,
                        uint32_t flags, uint64_t* replaced) = 0;
  // Entries after `cookie` (0 = from the start, "." and ".." included),
  // at most `max_entries`. Cookies stay valid across concurrent mutations
  // (an entry is never returned twice).
  virtual Result<std::vector<DirEntry>> ReadDir(uint64_t ino, uint64_t cookie,
                                                uint32_t max_entries) = 0;
  // Deletes an orphan (nlink 0) inode and its stripe map; returns the stripes
  // whose chunks can now be deleted. EBUSY if it still has links.
  virtual Status PurgeInode(uint64_t ino,
                            std::vector<ObsoleteStripe>* obsolete) = 0;
  // PurgeInode for several inodes in one call and, where the service can,
  // one durable commit (a bounded engine such as etcd commits several
  // groups). (*codes)[i] is inos[i]'s errno-style result: 0 purged, ENOENT
  // gone already, EBUSY still linked, other codes (a bad record, a failed
  // read) as PurgeInode's. The stripes of every purged inode are appended
  // to `obsolete`. A non-OK Status (a failed commit, unreachable) leaves
  // *codes empty: some groups may have been purged, and purging again is
  // safe (ENOENT for those done; their stripes are then not returned).
  // EINVAL for more than kMaxInodesPerPurge inodes. The default calls
  // PurgeInode once per inode.
  virtual Status PurgeInodes(const std::vector<uint64_t>& inos,
                             std::vector<int32_t>* codes,
                             std::vector<ObsoleteStripe>* obsolete) {
    codes->clear();
    if (inos.size() > kMaxInodesPerPurge) return TooManyToPurge(inos.size());
    for (uint64_t ino : inos)
      codes->push_back(PurgeInode(ino, obsolete).code());
    return Status::Ok();
  }
  static Status TooManyToPurge(size_t n) {
    return Status::InvalidArgument(std::to_string(n) +
                                   " inodes in one PurgeInodes, at most " +
                                   std::to_string(kMaxInodesPerPurge));
  }
  // For the orphan purger: the committed stripes of several orphans in one
  // call, so that listing a group costs one round trip, not two per inode.
  // (*codes)[i] is inos[i]'s result: 0 = an orphan (nlink 0) whose stripes
  // were appended to *stripes (inode, stripe, version; each inode's in
  // stripe order), ENOENT = gone, EBUSY = still linked, E2BIG = its stripes
  // would take the answer past kMaxOrphanStripes (none of them are returned:
  // list it with GetStripes), or the error reading that inode alone. When some
  // orphan has stripes (listed, or E2BIG), every mutation acknowledged before
  // the answer (its unlink included) is durable when the call returns, as
  // after Sync(): the caller may delete those chunks at once. A group of
  // orphans without stripes is not synced (nothing is deleted on its
  // strength): a caller that deletes chunks it learns of later (PurgeInodes'
  // `obsolete`) calls Sync() first. A non-OK Status
  // leaves *codes empty. EINVAL for more than kMaxInodesPerPurge inodes. A
  // service without it returns EOPNOTSUPP (the default); callers then use
  // GetAttr, GetStripes and Sync.
  virtual Status ListOrphanStripes(const std::vector<uint64_t>& inos,
                                   std::vector<int32_t>* codes,
                                   std::vector<ObsoleteStripe>* stripes) {
    (void)inos;
    (void)stripes;
    codes->clear();
    return Status::NotSupported("ListOrphanStripes");
  }
  // Orphans left by a crash (nlink 0), to purge at mount time.
  virtual Result<std::vector<uint64_t>> ListOrphans() = 0;
  virtual Result<FsStats> StatFs() = 0;
  // Returns once every mutation acknowledged so far is durable (fsync,
  // fsyncdir, syncfs; the orphan purger before it deletes chunks). Needed
  // only where namespace mutations are acknowledged before their sync
  // (MetaStoreOptions::namespace_sync_delay); the default, for services
  // whose every mutation is durable when acknowledged, does nothing.
  virtual Status Sync() { return Status::Ok(); }

  // xattrs. flags: XATTR_CREATE (1) / XATTR_REPLACE (2).
  virtual Status SetXattr(uint64_t ino, const std::string& name,
                          const std::string& value, uint32_t flags) = 0;
  virtual Result<std::string> GetXattr(uint64_t ino,
                                       const std::string& name) = 0;
  virtual Result<std::vector<std::string>> ListXattr(uint64_t ino) = 0;
  virtual Status RemoveXattr(uint64_t ino, const std::string& name) = 0;

  // --- stripe map -----------------------------------------------------------
  // Reserves `count` fresh, never-reused stripe version numbers; returns the
  // first (the range is [first, first+count)). Durable before returning.
  virtual Result<uint64_t> AllocateVersions(uint32_t count) = 0;
  // Committed versions of stripes [first, first+count) of `ino` that exist
  // (holes are absent from the result), in stripe order.
  virtual Result<std::vector<StripeVersion>> GetStripes(uint64_t ino,
                                                        uint64_t first,
                                                        uint64_t count) = 0;
  // Atomically makes `sv` the committed version of stripe sv.stripe of `ino`
  // if its current version is `expected_version` (0 = no stripe yet);
  // otherwise ESTALE and nothing changes. Also raises the file size to at
  // least `min_file_size` and sets mtime/ctime to now. The replaced version
  // (if any) is returned through *obsolete (version 0 when none).
  virtual Status CommitStripe(uint64_t ino, const StripeVersion& sv,
                              uint64_t expected_version, uint64_t min_file_size,
                              ObsoleteStripe* obsolete) = 0;
  // CommitStripe for several distinct stripes of one file in one atomic,
  // durable change: either every stripe's CAS holds and all are committed,
  // or nothing changes (ESTALE naming the first stale stripe). The file
  // grows to at least `min_file_size`. obsolete->at(i) is what commits[i]
  // replaced (version 0 when none). A service that cannot do this
  // atomically returns EOPNOTSUPP (the default); callers then commit one
  // stripe at a time.
  virtual Status CommitStripes(uint64_t ino,
                               const std::vector<StripeCommit>& commits,
                               uint64_t min_file_size,
                               std::vector<ObsoleteStripe>* obsolete) {
    (void)ino;
    (void)commits;
    (void)min_file_size;
    (void)obsolete;
    return Status::NotSupported("CommitStripes");
  }
  // CommitStripes that leaves the file's mtime and ctime as they are (the
  // size still grows): under the writeback cache the kernel owns them and
  // stores them with SETATTR. EOPNOTSUPP by default (an older metad);
  // callers then commit with CommitStripes, which stamps them.
  virtual Status CommitStripesKeepTimes(
      uint64_t ino, const std::vector<StripeCommit>& commits,
      uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete) {
    (void)ino;
    (void)commits;
    (void)min_file_size;
    (void)obsolete;
    return Status::NotSupported("CommitStripesKeepTimes");
  }
  // Punches whole stripes: drops the committed stripes [first, first+count)
  // of regular file `ino` (they read back as zeros and store nothing) and
  // returns them in `obsolete`; the size stays. A service without it
  // returns EOPNOTSUPP (the default); callers then write zeros.
  virtual Status DropStripes(uint64_t ino, uint64_t first, uint64_t count,
                             std::vector<ObsoleteStripe>* obsolete) {
    (void)ino;
    (void)first;
    (void)count;
    (void)obsolete;
    return Status::NotSupported("DropStripes");
  }
  // DropStripes that leaves mtime and ctime as they are (see
  // CommitStripesKeepTimes); EOPNOTSUPP by default.
  virtual Status DropStripesKeepTimes(uint64_t ino, uint64_t first,
                                      uint64_t count,
                                      std::vector<ObsoleteStripe>* obsolete) {
    (void)ino;
    (void)first;
    (void)count;
    (void)obsolete;
    return Status::NotSupported("DropStripesKeepTimes");
  }
  // Repair: sets the missing mask of the committed `version` of a stripe
  // (ESTALE if another version was committed meanwhile).
  virtual Status SetStripeMissing(uint64_t ino, uint64_t stripe,
                                  uint64_t version, uint32_t missing_mask) = 0;
  // Every committed stripe of the volume after (after_inode, after_stripe)
  // in (inode, stripe) order, at most `limit`; empty = end. For repair and
  // scrub. (0, 0) starts at the beginning (inode 0 never exists).
  virtual Result<std::vector<StripeRef>> ListStripes(uint64_t after_inode,
                                                     uint64_t after_stripe,
                                                     uint32_t limit) = 0;
};

}  // namespace stripefs

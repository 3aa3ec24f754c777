// StripeFs: the stripefs file system served over FUSE -- every RawFileSystem
// operation implemented on a Volume's MetaService (namespace, attributes,
// xattrs) and StripeClient (file data), with per-file stripe coalescing
// (StripeWriter) in between.
//
// Node lifetime: the kernel's lookup count and the open handles of every
// inode are tracked. An inode whose link count reached zero (unlink, rmdir,
// rename over it, an O_TMPFILE never linked) is queued for the background
// OrphanPurger (stripe chunks deleted, then metadata) once no lookups and no
// open handles remain. Orphans left by a crash are queued when the file
// system starts (ListOrphans()).
//
// st_blocks counts what is stored, in 512-byte units: the data share
// (k cells of chunk_len, cut at EOF) of each committed stripe, plus the
// stripes still buffered; holes count 0. SEEK_DATA/SEEK_HOLE use the same
// stripe map.
//
// Client caches (docs/filesystem.md "Client caches"): close-to-open. OPEN
// (and every attribute fetch: LOOKUP, GETATTR) reads the file's attributes
// from metadata; when its change marker moved (attr_cache.h) the file's
// cached stripe map is forgotten and the kernel's attributes invalidated.
// Under the writeback cache, where the kernel keeps its own i_size, a file
// that grew elsewhere is also pushed to the kernel (GrowthNotifier); a
// shrink is not (no notification lowers i_size).
// A READ of a file this mount is not writing then uses the cached size and
// stripe map: no metadata call. Files with a StripeWriter read through it.
//
// Writers: a StripeWriter exists only for a file this mount wrote (WRITE,
// fallocate); it is dropped at the last RELEASE once it holds nothing, so
// reading creates none and the flusher walks only files being written.
//
// Kernel caching: entries are valid for `entry_timeout`, attributes for
// `attr_timeout` (1 s both by default). With the
// writeback cache the kernel owns size and mtime while pages are dirty: WRITE
// extends the file through the backend commit, SETATTR(size) truncates
// (after flushing the file's buffered stripes), and GETATTR reports
// size = max(committed size, end of buffered data).
//
// Times (docs/filesystem.md "Timestamps"): with the writeback cache the
// kernel owns a regular file's mtime and ctime (it sets them at write()
// and sends them with SETATTR): stripe commits, size raises, truncates and
// punched holes leave them (StripeClient::SetKeepFileTimes), and a
// SETATTR of times on a file with buffered data is held with that data
// (StripeWriter::HoldTimes) and stored right after the commit that makes
// it durable, never forcing one, so the times land after the data they
// describe and time flushes cut no partial stripes; attribute replies
// show held times meanwhile. Without it the metadata
// service stamps them at each commit. atime is this file system's
// (AtimeTracker: relatime, strictatime, noatime, lazytime; the kernel
// never updates atime of a FUSE inode): set on READ and READDIR, written
// in batches, shown in every attribute reply meanwhile.
//
// Permissions: the mount uses default_permissions, so the kernel checks
// modes itself, and POSIX ACLs when FUSE_POSIX_ACL was agreed; mode and
// ACLs are kept in step here (posix_acl.h). ACCESS answers from the mode
// bits for callers that still send it.
//
// Ownership: borrows the Volume (must outlive this); owns the writers and
// the background flusher thread (idle timeout and memory cap).
// Thread-safety: every method may be called from any transport thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include "backend/client/orphan_purger.h"
#include "backend/client/volume.h"
#include "fs/atime_tracker.h"
#include "fs/attr_cache.h"
#include "fs/fs_counters.h"
#include "fs/growth_notifier.h"
#include "fs/stripe_writer.h"
#include "fuse/raw_file_system.h"
#include "fuse/session.h"

namespace stripefs::fs {

struct StripeFsOptions {
  bool coalesce = true;
  // Buffered partial stripes older than this are written in the background.
  std::chrono::milliseconds idle_flush{2000};
  // ...except the partial stripe at a file's write frontier, which waits up
  // to this long for its writer to complete it (the kernel's own bound on
  // dirty page age, dirty_expire_centisecs, is 30 s): page-cache writeback
  // of a sequential writer can pause for seconds with a stripe half sent.
  std::chrono::milliseconds frontier_hold{30000};
  // Total bytes of stripe buffers before the oldest are written.
  uint64_t memory_cap = uint64_t{256} << 20;
  // Pipelined stripe sends in flight per mount (each holds one stripe
  // buffer) and per file; 0 per mount: sends run inside the WRITE.
  // kWindowFromStripeSize (the default, see ResolveSendWindows): bigger
  // windows for smaller stripes, so that one commit round of the chunk
  // servers carries about as many bytes whatever the stripe size.
  static constexpr size_t kWindowFromStripeSize = ~size_t{0};
  size_t send_window = kWindowFromStripeSize;
  size_t file_send_window = kWindowFromStripeSize;
  // Attribute validity given to the kernel.
  std::chrono::milliseconds attr_timeout{1000};
  // Entry validity: how long the kernel may resolve a name to the inode we
  // answered (a positive dentry) without a LOOKUP. Another client's unlink
  // or rename of that name is not seen here for up to this long (the
  // kernel's own file systems see it at once; NFS after its cache time).
  // The LOOKUP after it expires costs a metadata call: an unlink of a file
  // created more than this long ago pays one more call.
  std::chrono::milliseconds entry_timeout{1000};
  bool purge_orphans_at_start = true;
  std::string mountpoint;  // for the stats only
  // atime policy (from the mount's -o values, AtimeOptionsFrom), and how
  // often pending atime updates are written (not with lazytime).
  AtimeOptions atime;
  std::chrono::milliseconds atime_flush{1000};
};

// The windows for `stripe_size` where `o` leaves them to it: per mount,
// 32 MiB of stripes, at least 16 and at most 64 (1 MiB stripes: 32;
// 4 MiB: 16); per file, half of that, at least 8 (16 and 8), never more
// than the mount's. Windows given explicitly are kept.
StripeFsOptions ResolveSendWindows(StripeFsOptions o, uint64_t stripe_size);

class StripeFs : public fuse::RawFileSystem {
 public:
  StripeFs(Volume* volume, StripeFsOptions options);
  ~StripeFs() override;  // flushes everything, stops the flusher

  // Where the engine's counters come from (optional; not owned).
  void AttachSession(fuse::Session* session) { session_.store(session); }
  // Before the session is destroyed: no notification is sent after this
  // returns (a growth push in progress is waited for).
  void DetachSession() {
    session_.store(nullptr);
    growth_.Stop();
  }
  // Writes every buffered stripe of every file; first error.
  Status FlushAll(FlushReason why);
  // The `stripefs stat` document (see fs_counters.h for the definitions).
  nlohmann::json StatsJson() const;
  // The options in use (send windows resolved for the stripe size).
  const StripeFsOptions& options() const { return options_; }
  const FsCounters& counters() const { return counters_; }
  const CoalesceCounters& coalesce_counters() const {
    return coalesce_counters_;
  }
  // StripeWriters alive (files this mount is writing or wrote and still
  // holds open).
  size_t live_writers() const;

  // ---- RawFileSystem ----
  void Init(const fuse::NegotiatedInit& negotiated) override;
  void Destroy() override;
  void Lookup(fuse::Replier r, uint64_t parent, std::string_view name) override;
  void Forget(uint64_t nodeid, uint64_t nlookup) override;
  void GetAttr(fuse::Replier r, uint64_t nodeid,
               const fuse_abi::fuse_getattr_in& in) override;
  void SetAttr(fuse::Replier r, uint64_t nodeid,
               const fuse_abi::fuse_setattr_in& in) override;
  void ReadLink(fuse::Replier r, uint64_t nodeid) override;
  void Symlink(fuse::Replier r, uint64_t parent, std::string_view name,
               std::string_view target) override;
  void Mknod(fuse::Replier r, uint64_t parent, std::string_view name,
             const fuse_abi::fuse_mknod_in& in) override;
  void Mkdir(fuse::Replier r, uint64_t parent, std::string_view name,
             const fuse_abi::fuse_mkdir_in& in) override;
  void Unlink(fuse::Replier r, uint64_t parent, std::string_view name) override;
  void Rmdir(fuse::Replier r, uint64_t parent, std::string_view name) override;
  void Rename(fuse::Replier r, uint64_t olddir, std::string_view oldname,
              uint64_t newdir, std::string_view newname,
              uint32_t flags) override;
  void Link(fuse::Replier r, uint64_t oldnode, uint64_t newparent,
            std::string_view newname) override;
  void Open(fuse::Replier r, uint64_t nodeid,
            const fuse_abi::fuse_open_in& in) override;
  void Read(fuse::Replier r, uint64_t nodeid,
            const fuse_abi::fuse_read_in& in) override;
  void Write(fuse::Replier r, uint64_t nodeid,
             const fuse::WriteRequest& w) override;
  void StatFs(fuse::Replier r, uint64_t nodeid) override;
  void Release(fuse::Replier r, uint64_t nodeid,
               const fuse_abi::fuse_release_in& in) override;
  void Fsync(fuse::Replier r, uint64_t nodeid,
             const fuse_abi::fuse_fsync_in& in) override;
  void SetXattr(fuse::Replier r, uint64_t nodeid, std::string_view name,
                std::span<const uint8_t> value,
                const fuse_abi::fuse_setxattr_in& in) override;
  void GetXattr(fuse::Replier r, uint64_t nodeid, std::string_view name,
                uint32_t size) override;
  void ListXattr(fuse::Replier r, uint64_t nodeid, uint32_t size) override;
  void RemoveXattr(fuse::Replier r, uint64_t nodeid,
                   std::string_view name) override;
  void Flush(fuse::Replier r, uint64_t nodeid,
             const fuse_abi::fuse_flush_in& in) override;
  void OpenDir(fuse::Replier r, uint64_t nodeid,
               const fuse_abi::fuse_open_in& in) override;
  void ReadDir(fuse::Replier r, uint64_t nodeid,
               const fuse_abi::fuse_read_in& in) override;
  void ReadDirPlus(fuse::Replier r, uint64_t nodeid,
                   const fuse_abi::fuse_read_in& in) override;
  void ReleaseDir(fuse::Replier r, uint64_t nodeid,
                  const fuse_abi::fuse_release_in& in) override;
  void FsyncDir(fuse::Replier r, uint64_t nodeid,
                const fuse_abi::fuse_fsync_in& in) override;
  void Access(fuse::Replier r, uint64_t nodeid, uint32_t mask) override;
  void Create(fuse::Replier r, uint64_t parent, std::string_view name,
              const fuse_abi::fuse_create_in& in) override;
  void TmpFile(fuse::Replier r, uint64_t parent,
               const fuse_abi::fuse_create_in& in) override;
  void Interrupt(uint64_t unique) override;
  void Fallocate(fuse::Replier r, uint64_t nodeid,
                 const fuse_abi::fuse_fallocate_in& in) override;
  void Lseek(fuse::Replier r, uint64_t nodeid,
             const fuse_abi::fuse_lseek_in& in) override;
  void SyncFs(fuse::Replier r, uint64_t nodeid) override;

 private:
  struct Node {
    uint64_t lookups = 0;
    uint32_t opens = 0;
    uint32_t write_opens = 0;   // of `opens`: not O_RDONLY
    bool maybe_orphan = false;  // link count seen at zero
    // The inode's attributes as this mount's last unlink, link or rename
    // of it committed them, and when (FoldTimeFlush: the kernel's time
    // flush that follows the change).
    std::optional<InodeAttr> changed;
    std::chrono::steady_clock::time_point changed_at;
  };
  // FoldTimeFlush's answer: the attributes to reply, and whether the inode
  // is an unlinked one waiting for its purge.
  struct FoldedFlush {
    InodeAttr attr;
    bool unlinked;
  };

  // Replies an error (counted by errno).
  void Fail(fuse::Replier& r, int err);
  void Fail(fuse::Replier& r, const Status& s) {
    Fail(r, s.code() ? s.code() : EIO);
  }
  // Attributes for the kernel; st_blocks from StoredBytes.
  fuse_abi::fuse_attr ToAttr(const InodeAttr& a);
  // Data bytes stored for `a`: committed stripes' data share up to EOF,
  // plus buffered stripes (0 on a metadata error: st_blocks is advisory).
  // Without buffered stripes, the count kept at `a`'s change marker.
  uint64_t StoredBytes(const InodeAttr& a);
  // Committed stripes of `ino` in [first, last], each with the data bytes
  // it stores (k * chunk_len), from metadata.
  Result<std::map<uint64_t, uint64_t>> CommittedStripes(uint64_t ino,
                                                        uint64_t first,
                                                        uint64_t last);
  // Stripes of `ino` in [first, last] that hold data, committed or
  // buffered, each with the data bytes it stores (k * chunk_len, or the
  // whole stripe while buffered), before any cut at EOF.
  Result<std::map<uint64_t, uint64_t>> DataStripes(uint64_t ino, uint64_t first,
                                                   uint64_t last);
  // Entry reply for `a` (takes a lookup reference).
  fuse_abi::fuse_entry_out MakeEntry(const InodeAttr& a);
  // GetAttr with the buffered size applied.
  Result<InodeAttr> AttrWithBuffered(uint64_t ino);
  // Size and times of `a` (a regular file) as its writer has them: the end
  // of buffered data and the times held for it.
  void WithBuffered(InodeAttr* a);
  // Whether a revalidation pushes another client's growth to the kernel:
  // not at all (READ: it may hold the page the push needs), when the size
  // grew from the one last fetched, or also when that one is unknown (OPEN:
  // the cache forgot it after an own change, or evicted it).
  enum class Growth { kIgnore, kShow, kShowAtOpen };
  // GetAttr from metadata, revalidating the caches (see the header).
  Result<InodeAttr> FetchAttr(uint64_t ino, Growth growth = Growth::kShow);
  // Records attributes read from metadata after `token` (AttrCache); true
  // if the file changed since they were last seen; a growth is shown to the
  // kernel as `growth` says (ShowGrowth).
  bool Revalidate(uint64_t token, const InodeAttr& a,
                  Growth growth = Growth::kShow);
  // With the writeback cache, raises the kernel's i_size of `a`'s file to
  // a.size (GrowthNotifier) unless this mount may hold unwritten data of
  // it (a writer, or an open for writing).
  void ShowGrowth(const InodeAttr& a);
  std::shared_ptr<StripeWriter> WriterFor(uint64_t ino, bool create);
  // Removes the writer of `ino` if nothing uses it and it holds no data.
  void DropIdleWriter(uint64_t ino);
  // READ of a file without a writer: cached size and stripe map.
  Result<size_t> ReadCommitted(uint64_t ino, uint64_t offset,
                               std::span<uint8_t> out);
  // Purges `ino` if it is an orphan nobody references (nodes_mu_ NOT held).
  void MaybePurge(uint64_t ino);
  // Queues `ino` for the purger.
  void Purge(uint64_t ino);
  void MarkOrphan(uint64_t ino);
  void FlusherLoop();
  void ReplyReadDir(fuse::Replier& r, uint64_t ino,
                    const fuse_abi::fuse_read_in& in, bool plus);
  // Writes zeros over [from, to) through the file's writer.
  Status WriteZeros(uint64_t ino, uint64_t from, uint64_t to);
  // PUNCH_HOLE over [from, to) (to <= size): drops the whole stripes inside
  // from the stripe map and deletes their chunks (a real hole), zeroes the
  // partial stripe after them; returns the end of [from, end) where zeros
  // are still due (`to` when no whole stripe is inside or the service
  // cannot drop stripes).
  Result<uint64_t> PunchWholeStripes(uint64_t ino, uint64_t from, uint64_t to,
                                     uint64_t size);
  // CREATE/MKNOD/MKDIR: one CreateEntry (setgid and the absence of a
  // default ACL checked by the metadata service; the parent's new
  // attributes kept for the kernel's next GETATTR), or, when the parent has
  // a default ACL or the service lacks CreateEntry, GetAttr + GetXattr of
  // the parent, MkNode/Mkdir and the inherited ACLs. `mode` has the type.
  Result<InodeAttr> NewEntry(const fuse::Replier& r, uint64_t parent,
                             std::string_view name, uint32_t mode,
                             uint32_t rdev, uint32_t umask);
  // The reply to the kernel's time flush (SETATTR of mtime and ctime only)
  // of `ino` right after this mount's namespace change of it, nothing
  // stored (stripe_fs_namespace.cc): an inode unlinked to nlink 0 and not
  // open here gets the times it sent; a linked one, once, within the
  // attribute timeout and only if the mtime sent is the one the change
  // left, gets the change's attributes (the ctime the change committed).
  std::optional<FoldedFlush> FoldTimeFlush(uint64_t ino,
                                           const fuse_abi::fuse_setattr_in& in);
  // Keeps `a` (as committed by an unlink, link or rename) for
  // FoldTimeFlush, if the kernel knows the inode.
  void NoteChanged(const InodeAttr& a);
  // RENAME: one RenameEntry (both directories' attributes kept for the
  // kernel's GETATTRs, the inode's for its time flush), or, against a
  // service without it, Rename + GetAttr of a replaced inode.
  Result<RenameChange> RenameCalls(uint64_t olddir, const std::string& oldname,
                                   uint64_t newdir, const std::string& newname,
                                   uint32_t flags);
  // A READ of `ino` (or READDIR of a directory, `dir`) happened: atime
  // pending per policy. `known`: its attributes when at hand (else the
  // cached ones, or a fetch).
  void NoteAccess(uint64_t ino, bool dir, const InodeAttr* known = nullptr);
  // Writes the pending atime of `ino` / of every inode (metadata SetAttr
  // of atime only, kKeepTimes); errors are counted.
  void WriteAtime(uint64_t ino);
  void WriteAtimes();
  void StoreAtime(uint64_t ino, Timespec atime);
  // Resize through the stripe client (after flushing buffered data).
  Result<InodeAttr> Resize(uint64_t ino, uint64_t new_size);

  Volume* const volume_;
  MetaService& meta_;
  StripeClient& client_;
  const StripeFsOptions options_;
  const uint64_t stripe_size_;
  std::atomic<fuse::Session*> session_{nullptr};
  std::atomic<uint32_t> max_write_{0};
  std::atomic<bool> dont_mask_{false};        // FUSE_DONT_MASK: umask is ours
  std::atomic<bool> writeback_cache_{false};  // negotiated at INIT

  FsCounters counters_;
  CoalesceCounters coalesce_counters_;
  CoalesceBudget budget_;
  // Stripe buffers of every writer (idle ones bounded: see the constructor).
  BufferPool stripe_pool_;

  // Before nodes_: the writers' pipelined sends run on it.
  std::unique_ptr<StripeSender> sender_;
  mutable std::mutex nodes_mu_;
  std::unordered_map<uint64_t, Node> nodes_;  // guarded by nodes_mu_
  // The files being written (guarded by nodes_mu_).
  std::unordered_map<uint64_t, std::shared_ptr<StripeWriter>> writers_;
  AttrCache attr_cache_;
  DirAttrCache dir_attrs_;
  AtimeTracker atimes_;
  // CreateEntry/UnlinkEntry, LinkEntry, RenameEntry answered (false after
  // EOPNOTSUPP: an older metad).
  std::atomic<bool> entry_calls_{true};
  std::atomic<bool> link_entry_calls_{true};
  std::atomic<bool> rename_entry_calls_{true};
  std::atomic<uint64_t> next_fh_{1};

  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stop_ = false;
  std::thread flusher_;
  std::atomic<bool> destroyed_{false};
  GrowthNotifier growth_;
  // Last: destroyed (drained) first, while everything it uses still lives.
  std::unique_ptr<OrphanPurger> purger_;
};

}  // namespace stripefs::fs

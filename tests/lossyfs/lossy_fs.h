// LossyFs: a crash-simulating file system for tests (test code, not
// product), served through our FUSE engine (fuse/). It shows what a power
// cut would leave of what a program wrote, in the spirit of LazyFS.
//
// Two views of every inode:
//   live     what the program sees: every write and namespace change at once.
//   durable  what a power cut keeps, POSIX-strict (not ext4-lenient):
//            - a file's data (and size) as of its last fsync or fdatasync,
//              plus each O_SYNC/O_DSYNC write's own range (the kernel flags
//              those WRITEs); fsync also keeps mode, owner and times;
//            - a directory's entries as of its last fsync of that directory.
//              So a new file that was fsync'd but whose directory was not is
//              GONE after a cut; a rename, unlink or create without an fsync
//              of the directories involved reverts (a rename across
//              directories with only one of them synced can leave the inode
//              under both names, or under neither: each directory is its own
//              unit, as POSIX promises nothing more);
//            - Sync() (the control command "sync", and SYNCFS) makes the whole
//              live view durable. Note: Linux sends SYNCFS only to fuseblk
//              and virtiofs mounts (fs/fuse/inode.c, fc->sync_fs), so
//              syncfs(2)/sync(2) on a LossyFs mount do NOT reach it: a
//              program relying on syncfs loses data here that a real file
//              system keeps.
// PowerCut() drops every unsynced write and namespace change (live :=
// durable; inodes no longer reachable from the root vanish) and, with
// tear=true, keeps a seeded prefix of the last unsynced WRITE cut at a
// 512-byte sector boundary of the file (sectors strictly inside the write;
// a write within one sector is dropped whole). After the cut the surviving
// state is both live and durable and is served at once: the kernel caches
// nothing (entry/attr timeouts 0, FOPEN_DIRECT_IO, no writeback cache), so
// the next access sees it. Programs should close their files and stop
// before a cut, as a machine losing power stops them.
//
// Control file: `<mount>/.lossyfs-control` (root only, never listed):
// write "cut", "cut torn" or "sync" (one command per write, a trailing
// newline allowed); a read returns "cuts N syncs M\n". An unknown command
// fails the write with EINVAL and a stderr line naming the valid ones.
//
// Not modelled: xattrs (ENOSYS), mknod of devices, SEEK_DATA/HOLE, mmap
// beyond what the kernel turns into WRITE + FSYNC, reordering of unsynced
// writes. Everything is held in memory (live + durable: about twice the
// data): size a test's data to RAM. Inode numbers are never reused.
//
// Ownership: the caller owns the LossyFs and must keep it alive while a
// Session serves it. Thread-safety: all methods are thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "fuse/raw_file_system.h"
#include "fuse/session.h"

namespace stripefs::lossyfs {

inline constexpr std::string_view kControlName = ".lossyfs-control";
inline constexpr uint64_t kSectorBytes = 512;

// What a PowerCut did (for the test's log and its checks).
struct CutReport {
  bool torn = false;    // a prefix of the last unsynced write was kept
  uint64_t ino = 0;     // that write's inode
  uint64_t offset = 0;  // the write's offset
  uint64_t length = 0;  // the write's length
  uint64_t kept = 0;    // bytes of it kept from `offset` (sector-aligned end)
  uint64_t vanished_inodes = 0;  // no longer reachable from the root
};

class LossyFs : public fuse::RawFileSystem {
 public:
  // `seed` drives the torn-write choice; print it so a failure reproduces.
  explicit LossyFs(uint64_t seed);
  ~LossyFs() override;

  // What the mount should negotiate for the rules above to hold (no
  // writeback cache, no readdirplus, no async direct I/O, /dev/fuse transport).
  static fuse::SessionOptions SessionOptionsForLossyFs();

  CutReport PowerCut(bool tear);
  void Sync();  // everything live becomes durable
  uint64_t cuts() const;

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
  void Create(fuse::Replier r, uint64_t parent, std::string_view name,
              const fuse_abi::fuse_create_in& in) override;
  void Read(fuse::Replier r, uint64_t nodeid,
            const fuse_abi::fuse_read_in& in) override;
  void Write(fuse::Replier r, uint64_t nodeid,
             const fuse::WriteRequest& w) override;
  void StatFs(fuse::Replier r, uint64_t nodeid) override;
  void Release(fuse::Replier r, uint64_t,
               const fuse_abi::fuse_release_in&) override {
    r.Ok();
  }
  void Flush(fuse::Replier r, uint64_t,
             const fuse_abi::fuse_flush_in&) override {
    r.Ok();
  }
  void Fsync(fuse::Replier r, uint64_t nodeid,
             const fuse_abi::fuse_fsync_in& in) override;
  void OpenDir(fuse::Replier r, uint64_t nodeid,
               const fuse_abi::fuse_open_in& in) override;
  void ReadDir(fuse::Replier r, uint64_t nodeid,
               const fuse_abi::fuse_read_in& in) override;
  void ReleaseDir(fuse::Replier r, uint64_t,
                  const fuse_abi::fuse_release_in&) override {
    r.Ok();
  }
  void FsyncDir(fuse::Replier r, uint64_t nodeid,
                const fuse_abi::fuse_fsync_in& in) override;
  void Access(fuse::Replier r, uint64_t, uint32_t) override { r.Ok(); }
  void Fallocate(fuse::Replier r, uint64_t nodeid,
                 const fuse_abi::fuse_fallocate_in& in) override;
  void SyncFs(fuse::Replier r, uint64_t nodeid) override;

 private:
  // One version of an inode (live or durable).
  struct State {
    uint32_t mode = 0, uid = 0, gid = 0;
    uint64_t atime = 0, mtime = 0, ctime = 0;
    uint32_t atimensec = 0, mtimensec = 0, ctimensec = 0;
    std::vector<uint8_t> data;                 // regular files
    std::string target;                        // symlinks
    std::map<std::string, uint64_t> children;  // directories
  };
  struct Node {
    uint64_t ino = 0;
    State live, durable;
    // live.data may differ from durable.data only within [dirty_lo,
    // dirty_hi) and in size: a sync copies just that range.
    uint64_t dirty_lo = UINT64_MAX, dirty_hi = 0;
    uint32_t nlink = 0;    // live names (directories report 2)
    uint64_t lookups = 0;  // the kernel's references
  };
  // The last WRITE not yet durable, for tearing.
  struct LastWrite {
    bool valid = false;
    uint64_t ino = 0, offset = 0, length = 0;
  };

  // Attributes and symlink target, not data or entries.
  static void KeepMeta(const State& from, State* to);
  Node* Get(uint64_t ino);  // mu_ held; null if unknown
  Node* NewNode(uint32_t mode, uint32_t uid, uint32_t gid);
  fuse_abi::fuse_attr AttrOf(const Node& n) const;
  fuse_abi::fuse_entry_out EntryOf(Node* n);  // counts a lookup
  void MarkDirty(Node* n, uint64_t lo, uint64_t hi);
  void SyncDataLocked(Node* n);
  void SyncAllLocked();
  void MaybeFreeLocked(Node* n);
  void MakeNode(fuse::Replier r, uint64_t parent, std::string_view name,
                uint32_t mode, std::string_view target, bool open);
  // The control file's commands; false for an unknown one.
  bool RunCommand(std::string_view cmd);

  mutable std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Node>> nodes_;
  uint64_t next_ino_ = 3;  // 1 root, 2 the control file
  LastWrite last_write_;
  std::mt19937_64 rng_;
  uint64_t cuts_ = 0, syncs_ = 0;
};

}  // namespace stripefs::lossyfs

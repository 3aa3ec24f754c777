// RawFileSystem: the interface a file system implements to be served by our
// FUSE engine (the C++ cousin of go-fuse's fuse.RawFileSystem).
//
// One virtual per FUSE opcode, with typed arguments (the validated wire
// structs of fuse_abi.h plus names and data as views). Every default answers
// ENOSYS (FORGET/BATCH_FORGET/INTERRUPT default to doing nothing), so a file
// system overrides only what it supports.
//
// Replies: each call that expects an answer gets a Replier (see replier.h)
// and must eventually call exactly one reply method on it, either before
// returning or later from any thread (asynchronous completion). Views
// (names, WRITE data) stay valid until that reply.
//
// Threading: calls arrive concurrently on transport threads (several
// /dev/fuse workers, one pinned thread per io-uring queue). Implementations
// must be thread-safe; they should not block a transport thread for long
// when they can complete asynchronously instead.
//
// Killing privileges (FUSE_HANDLE_KILLPRIV_V2, asked for by default, see
// InitOptions): the kernel then no longer checks security.capability before
// each write; it flags the requests that must drop privileges instead, and
// the file system must honour the flag by applying ModeAfterKillPriv() to
// the mode and removing kCapabilityXattr:
//   WRITE    w.kill_suidgid()            (caller lacks CAP_FSETID)
//   SETATTR  in.valid & FATTR_KILL_SUIDGID  (truncate without CAP_FSETID;
//            every chown of a non-directory) unless FATTR_MODE is set too
//   OPEN     in.open_flags & FUSE_OPEN_KILL_SUIDGID  (O_TRUNC; only sent
//            with FUSE_ATOMIC_O_TRUNC)
//
// Node ids: the kernel's nodeid; kRootId (1) is the root. Lookups increment
// the kernel's reference count per returned entry (LOOKUP, CREATE, MKNOD,
// MKDIR, SYMLINK, LINK, READDIRPLUS entries with nodeid != 0), FORGET and
// BATCH_FORGET decrement it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "fuse/fuse_abi.h"
#include "fuse/replier.h"

namespace stripefs::fuse {

struct NegotiatedInit;  // session_info.h

// The mode after killing privileges, as the VFS does it: set-user-ID
// always goes; set-group-ID only with group execute (without it, the bit
// marks mandatory locking, not privilege).
constexpr uint32_t ModeAfterKillPriv(uint32_t mode) {
  constexpr uint32_t kSuid = 04000, kSgid = 02000, kGroupExec = 00010;
  mode &= ~kSuid;
  if (mode & kGroupExec) mode &= ~kSgid;
  return mode;
}
static_assert(ModeAfterKillPriv(0106755) == 0100755);
static_assert(ModeAfterKillPriv(0102755) == 0100755);
static_assert(ModeAfterKillPriv(0102745) == 0102745);
// File capabilities, removed with set-user-ID.
inline constexpr std::string_view kCapabilityXattr = "security.capability";

// A WRITE request: the wire struct plus the data, without a copy.
struct WriteRequest {
  fuse_abi::fuse_write_in in{};
  std::span<const uint8_t> data;  // in.size bytes

  uint64_t offset() const { return in.offset; }
  uint32_t size() const { return in.size; }
  uint64_t fh() const { return in.fh; }
  // Writeback from the page cache (delayed, background; fh is a guess).
  bool is_writeback() const {
    return (in.write_flags & fuse_abi::FUSE_WRITE_CACHE) != 0;
  }
  bool has_lock_owner() const {
    return (in.write_flags & fuse_abi::FUSE_WRITE_LOCKOWNER) != 0;
  }
  bool kill_suidgid() const {
    return (in.write_flags & fuse_abi::FUSE_WRITE_KILL_SUIDGID) != 0;
  }
};

class RawFileSystem {
 public:
  virtual ~RawFileSystem() = default;

  // Called once INIT was negotiated (before any other request is
  // dispatched) with what the kernel offered and what was agreed.
  virtual void Init(const NegotiatedInit& /*negotiated*/) {}
  // DESTROY from the kernel, or session end without one (called once).
  virtual void Destroy() {}

  virtual void Lookup(Replier r, uint64_t parent, std::string_view name) {
    r.Error(ENOSYS);
    (void)parent, (void)name;
  }
  // No reply. nlookup references to `nodeid` are dropped.
  virtual void Forget(uint64_t nodeid, uint64_t nlookup) {
    (void)nodeid, (void)nlookup;
  }
  // No reply. Default: Forget() for each entry.
  virtual void BatchForget(std::span<const fuse_abi::fuse_forget_one> items) {
    for (const auto& f : items) Forget(f.nodeid, f.nlookup);
  }
  virtual void GetAttr(Replier r, uint64_t nodeid,
                       const fuse_abi::fuse_getattr_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // in.valid says which fields to change (FATTR_*), incl. FATTR_SIZE
  // (truncate) with FATTR_FH when done through an open file.
  virtual void SetAttr(Replier r, uint64_t nodeid,
                       const fuse_abi::fuse_setattr_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  virtual void ReadLink(Replier r, uint64_t nodeid) {
    r.Error(ENOSYS);
    (void)nodeid;
  }
  virtual void Symlink(Replier r, uint64_t parent, std::string_view name,
                       std::string_view target) {
    r.Error(ENOSYS);
    (void)parent, (void)name, (void)target;
  }
  virtual void Mknod(Replier r, uint64_t parent, std::string_view name,
                     const fuse_abi::fuse_mknod_in& in) {
    r.Error(ENOSYS);
    (void)parent, (void)name, (void)in;
  }
  virtual void Mkdir(Replier r, uint64_t parent, std::string_view name,
                     const fuse_abi::fuse_mkdir_in& in) {
    r.Error(ENOSYS);
    (void)parent, (void)name, (void)in;
  }
  virtual void Unlink(Replier r, uint64_t parent, std::string_view name) {
    r.Error(ENOSYS);
    (void)parent, (void)name;
  }
  virtual void Rmdir(Replier r, uint64_t parent, std::string_view name) {
    r.Error(ENOSYS);
    (void)parent, (void)name;
  }
  // RENAME and RENAME2; flags: kRenameNoReplace / kRenameExchange /
  // kRenameWhiteout (0 for plain RENAME).
  virtual void Rename(Replier r, uint64_t olddir, std::string_view oldname,
                      uint64_t newdir, std::string_view newname,
                      uint32_t flags) {
    r.Error(ENOSYS);
    (void)olddir, (void)oldname, (void)newdir, (void)newname, (void)flags;
  }
  virtual void Link(Replier r, uint64_t oldnode, uint64_t newparent,
                    std::string_view newname) {
    r.Error(ENOSYS);
    (void)oldnode, (void)newparent, (void)newname;
  }
  virtual void Open(Replier r, uint64_t nodeid,
                    const fuse_abi::fuse_open_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // Reply with Data() (short = EOF) or ReplyBuffer() + Data().
  virtual void Read(Replier r, uint64_t nodeid,
                    const fuse_abi::fuse_read_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // Reply with Written(bytes).
  virtual void Write(Replier r, uint64_t nodeid, const WriteRequest& w) {
    r.Error(ENOSYS);
    (void)nodeid, (void)w;
  }
  virtual void StatFs(Replier r, uint64_t nodeid) {
    r.Error(ENOSYS);
    (void)nodeid;
  }
  virtual void Release(Replier r, uint64_t nodeid,
                       const fuse_abi::fuse_release_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  virtual void Fsync(Replier r, uint64_t nodeid,
                     const fuse_abi::fuse_fsync_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // value.size() == in.size. in.flags: XATTR_CREATE / XATTR_REPLACE.
  virtual void SetXattr(Replier r, uint64_t nodeid, std::string_view name,
                        std::span<const uint8_t> value,
                        const fuse_abi::fuse_setxattr_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)name, (void)value, (void)in;
  }
  // size == 0: reply XattrSize(n); else Data(value) or ERANGE.
  virtual void GetXattr(Replier r, uint64_t nodeid, std::string_view name,
                        uint32_t size) {
    r.Error(ENOSYS);
    (void)nodeid, (void)name, (void)size;
  }
  // size == 0: reply XattrSize(n); else Data("a\0b\0") or ERANGE.
  virtual void ListXattr(Replier r, uint64_t nodeid, uint32_t size) {
    r.Error(ENOSYS);
    (void)nodeid, (void)size;
  }
  virtual void RemoveXattr(Replier r, uint64_t nodeid, std::string_view name) {
    r.Error(ENOSYS);
    (void)nodeid, (void)name;
  }
  virtual void Flush(Replier r, uint64_t nodeid,
                     const fuse_abi::fuse_flush_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  virtual void OpenDir(Replier r, uint64_t nodeid,
                       const fuse_abi::fuse_open_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // Reply with entries built by DirentEncoder (dirent_encoder.h), at most
  // in.size bytes, starting after cookie in.offset.
  virtual void ReadDir(Replier r, uint64_t nodeid,
                       const fuse_abi::fuse_read_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // As ReadDir with DirentPlusEncoder; every entry with nodeid != 0 counts
  // as a lookup.
  virtual void ReadDirPlus(Replier r, uint64_t nodeid,
                           const fuse_abi::fuse_read_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  virtual void ReleaseDir(Replier r, uint64_t nodeid,
                          const fuse_abi::fuse_release_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  virtual void FsyncDir(Replier r, uint64_t nodeid,
                        const fuse_abi::fuse_fsync_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  virtual void Access(Replier r, uint64_t nodeid, uint32_t mask) {
    r.Error(ENOSYS);
    (void)nodeid, (void)mask;
  }
  // Reply with Create(entry, open).
  virtual void Create(Replier r, uint64_t parent, std::string_view name,
                      const fuse_abi::fuse_create_in& in) {
    r.Error(ENOSYS);
    (void)parent, (void)name, (void)in;
  }
  // O_TMPFILE in directory `parent`: an unnamed file with nlink 0 that LINK
  // may name later. Reply with Create(entry, open), as for CREATE.
  virtual void TmpFile(Replier r, uint64_t parent,
                       const fuse_abi::fuse_create_in& in) {
    r.Error(ENOSYS);
    (void)parent, (void)in;
  }
  // The kernel interrupted request `unique` (its Replier now reports
  // interrupted()). Informational; no reply.
  virtual void Interrupt(uint64_t unique) { (void)unique; }
  virtual void Fallocate(Replier r, uint64_t nodeid,
                         const fuse_abi::fuse_fallocate_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // SEEK_DATA / SEEK_HOLE (in.whence); reply Lseek(offset).
  virtual void Lseek(Replier r, uint64_t nodeid,
                     const fuse_abi::fuse_lseek_in& in) {
    r.Error(ENOSYS);
    (void)nodeid, (void)in;
  }
  // COPY_FILE_RANGE and COPY_FILE_RANGE_64; reply CopyFileRange(bytes).
  virtual void CopyFileRange(Replier r, uint64_t nodeid_in,
                             const fuse_abi::fuse_copy_file_range_in& in) {
    r.Error(ENOSYS);
    (void)nodeid_in, (void)in;
  }
  virtual void SyncFs(Replier r, uint64_t nodeid) {
    r.Error(ENOSYS);
    (void)nodeid;
  }
};

}  // namespace stripefs::fuse

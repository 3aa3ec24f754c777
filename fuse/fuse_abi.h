// The FUSE wire ABI stripefs speaks: Linux 7.2 uapi, protocol 7.45, plus the
// opt-alignment extension (DDN "redfs" compatible, design §4) and the
// FUSE-over-io-uring structures.
//
// This is the ONE place where wire layouts live. Everything is written from
// the uapi facts and every size/offset is checked with static_assert, so a
// layout mistake fails the build. Plain structs, no ownership, no state:
// safe to use from any thread. Names follow include/uapi/linux/fuse.h but
// live in namespace stripefs::fuse_abi (no clash with <linux/fuse.h>).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stripefs::fuse_abi {

inline constexpr uint32_t kKernelVersion = 7;        // FUSE_KERNEL_VERSION
inline constexpr uint32_t kKernelMinorVersion = 45;  // what we speak
inline constexpr uint64_t kRootId = 1;               // FUSE_ROOT_ID
inline constexpr size_t kMinReadBuffer = 8192;       // FUSE_MIN_READ_BUFFER

// ---- INIT flags (64-bit view: bits 32..63 travel in flags2) ----
inline constexpr uint64_t FUSE_ASYNC_READ = 1ULL << 0;
inline constexpr uint64_t FUSE_POSIX_LOCKS = 1ULL << 1;
inline constexpr uint64_t FUSE_FILE_OPS = 1ULL << 2;
inline constexpr uint64_t FUSE_ATOMIC_O_TRUNC = 1ULL << 3;
inline constexpr uint64_t FUSE_EXPORT_SUPPORT = 1ULL << 4;
inline constexpr uint64_t FUSE_BIG_WRITES = 1ULL << 5;
inline constexpr uint64_t FUSE_DONT_MASK = 1ULL << 6;
inline constexpr uint64_t FUSE_SPLICE_WRITE = 1ULL << 7;
inline constexpr uint64_t FUSE_SPLICE_MOVE = 1ULL << 8;
inline constexpr uint64_t FUSE_SPLICE_READ = 1ULL << 9;
inline constexpr uint64_t FUSE_FLOCK_LOCKS = 1ULL << 10;
inline constexpr uint64_t FUSE_HAS_IOCTL_DIR = 1ULL << 11;
inline constexpr uint64_t FUSE_AUTO_INVAL_DATA = 1ULL << 12;
inline constexpr uint64_t FUSE_DO_READDIRPLUS = 1ULL << 13;
inline constexpr uint64_t FUSE_READDIRPLUS_AUTO = 1ULL << 14;
inline constexpr uint64_t FUSE_ASYNC_DIO = 1ULL << 15;
inline constexpr uint64_t FUSE_WRITEBACK_CACHE = 1ULL << 16;
inline constexpr uint64_t FUSE_NO_OPEN_SUPPORT = 1ULL << 17;
inline constexpr uint64_t FUSE_PARALLEL_DIROPS = 1ULL << 18;
inline constexpr uint64_t FUSE_HANDLE_KILLPRIV = 1ULL << 19;
inline constexpr uint64_t FUSE_POSIX_ACL = 1ULL << 20;
inline constexpr uint64_t FUSE_ABORT_ERROR = 1ULL << 21;
inline constexpr uint64_t FUSE_MAX_PAGES = 1ULL << 22;
inline constexpr uint64_t FUSE_CACHE_SYMLINKS = 1ULL << 23;
inline constexpr uint64_t FUSE_NO_OPENDIR_SUPPORT = 1ULL << 24;
inline constexpr uint64_t FUSE_EXPLICIT_INVAL_DATA = 1ULL << 25;
inline constexpr uint64_t FUSE_MAP_ALIGNMENT = 1ULL << 26;
inline constexpr uint64_t FUSE_SUBMOUNTS = 1ULL << 27;
inline constexpr uint64_t FUSE_HANDLE_KILLPRIV_V2 = 1ULL << 28;
inline constexpr uint64_t FUSE_SETXATTR_EXT = 1ULL << 29;
inline constexpr uint64_t FUSE_INIT_EXT = 1ULL << 30;
inline constexpr uint64_t FUSE_INIT_RESERVED = 1ULL << 31;
inline constexpr uint64_t FUSE_SECURITY_CTX = 1ULL << 32;
inline constexpr uint64_t FUSE_HAS_INODE_DAX = 1ULL << 33;
inline constexpr uint64_t FUSE_CREATE_SUPP_GROUP = 1ULL << 34;
inline constexpr uint64_t FUSE_HAS_EXPIRE_ONLY = 1ULL << 35;
inline constexpr uint64_t FUSE_DIRECT_IO_ALLOW_MMAP = 1ULL << 36;
inline constexpr uint64_t FUSE_PASSTHROUGH = 1ULL << 37;
inline constexpr uint64_t FUSE_NO_EXPORT_SUPPORT = 1ULL << 38;
inline constexpr uint64_t FUSE_HAS_RESEND = 1ULL << 39;
inline constexpr uint64_t FUSE_ALLOW_IDMAP = 1ULL << 40;
inline constexpr uint64_t FUSE_OVER_IO_URING = 1ULL << 41;
inline constexpr uint64_t FUSE_REQUEST_TIMEOUT = 1ULL << 42;
// opt-alignment extension (DDN redfs ABI): bit 18 of flags2.
inline constexpr uint64_t FUSE_ALIGN_PG_ORDER = 1ULL << 50;
// Compound requests (stripefs series, patch 0006; DDN redfs's FUSE_COMPOUND
// opcode): bit 19 of flags2, next to opt-alignment. The kernel offers it in
// fuse_init_in; a server that sets it in fuse_init_out accepts FUSE_COMPOUND
// and the kernel then sends OPEN+GETATTR as one request.
inline constexpr uint64_t FUSE_HAS_COMPOUND = 1ULL << 51;
// Reduced io-uring queues (stripefs series, patch 0007): bit 20 of flags2,
// after FUSE_HAS_COMPOUND (no DDN/upstream ABI bit for it was found). The
// kernel offers it in fuse_init_in with FUSE_OVER_IO_URING when it serves a
// ring with fewer queues than possible CPUs; it needs no echo in init_out.
// Without it such a ring never becomes ready and every request hangs.
inline constexpr uint64_t FUSE_URING_REDUCED_Q = 1ULL << 52;

// ---- fuse_setattr_in.valid ----
inline constexpr uint32_t FATTR_MODE = 1u << 0;
inline constexpr uint32_t FATTR_UID = 1u << 1;
inline constexpr uint32_t FATTR_GID = 1u << 2;
inline constexpr uint32_t FATTR_SIZE = 1u << 3;
inline constexpr uint32_t FATTR_ATIME = 1u << 4;
inline constexpr uint32_t FATTR_MTIME = 1u << 5;
inline constexpr uint32_t FATTR_FH = 1u << 6;
inline constexpr uint32_t FATTR_ATIME_NOW = 1u << 7;
inline constexpr uint32_t FATTR_MTIME_NOW = 1u << 8;
inline constexpr uint32_t FATTR_LOCKOWNER = 1u << 9;
inline constexpr uint32_t FATTR_CTIME = 1u << 10;
inline constexpr uint32_t FATTR_KILL_SUIDGID = 1u << 11;

// ---- fuse_open_out.open_flags ----
inline constexpr uint32_t FOPEN_DIRECT_IO = 1u << 0;
inline constexpr uint32_t FOPEN_KEEP_CACHE = 1u << 1;
inline constexpr uint32_t FOPEN_NONSEEKABLE = 1u << 2;
inline constexpr uint32_t FOPEN_CACHE_DIR = 1u << 3;
inline constexpr uint32_t FOPEN_STREAM = 1u << 4;
inline constexpr uint32_t FOPEN_NOFLUSH = 1u << 5;
inline constexpr uint32_t FOPEN_PARALLEL_DIRECT_WRITES = 1u << 6;
inline constexpr uint32_t FOPEN_PASSTHROUGH = 1u << 7;

// ---- misc request flags ----
inline constexpr uint32_t FUSE_RELEASE_FLUSH = 1u << 0;
inline constexpr uint32_t FUSE_RELEASE_FLOCK_UNLOCK = 1u << 1;
inline constexpr uint32_t FUSE_GETATTR_FH = 1u << 0;
inline constexpr uint32_t FUSE_LK_FLOCK = 1u << 0;
// FUSE_WRITE_CACHE: delayed write from the page cache (writeback; background).
inline constexpr uint32_t FUSE_WRITE_CACHE = 1u << 0;
inline constexpr uint32_t FUSE_WRITE_LOCKOWNER = 1u << 1;
inline constexpr uint32_t FUSE_WRITE_KILL_SUIDGID = 1u << 2;
inline constexpr uint32_t FUSE_READ_LOCKOWNER = 1u << 1;
inline constexpr uint32_t FUSE_FSYNC_FDATASYNC = 1u << 0;
inline constexpr uint32_t FUSE_ATTR_SUBMOUNT = 1u << 0;
inline constexpr uint32_t FUSE_ATTR_DAX = 1u << 1;
inline constexpr uint32_t FUSE_OPEN_KILL_SUIDGID = 1u << 0;
inline constexpr uint32_t FUSE_SETXATTR_ACL_KILL_SGID = 1u << 0;
inline constexpr uint32_t FUSE_EXPIRE_ONLY = 1u << 0;
// rename2 flags (linux/fs.h values)
inline constexpr uint32_t kRenameNoReplace = 1u << 0;
inline constexpr uint32_t kRenameExchange = 1u << 1;
inline constexpr uint32_t kRenameWhiteout = 1u << 2;

// INTERRUPT requests carry this bit in `unique`; RESEND marks resent ones.
inline constexpr uint64_t FUSE_INT_REQ_BIT = 1ULL << 0;
inline constexpr uint64_t FUSE_UNIQUE_RESEND = 1ULL << 63;

enum Opcode : uint32_t {
  FUSE_LOOKUP = 1,
  FUSE_FORGET = 2,  // no reply
  FUSE_GETATTR = 3,
  FUSE_SETATTR = 4,
  FUSE_READLINK = 5,
  FUSE_SYMLINK = 6,
  FUSE_MKNOD = 8,
  FUSE_MKDIR = 9,
  FUSE_UNLINK = 10,
  FUSE_RMDIR = 11,
  FUSE_RENAME = 12,
  FUSE_LINK = 13,
  FUSE_OPEN = 14,
  FUSE_READ = 15,
  FUSE_WRITE = 16,
  FUSE_STATFS = 17,
  FUSE_RELEASE = 18,
  FUSE_FSYNC = 20,
  FUSE_SETXATTR = 21,
  FUSE_GETXATTR = 22,
  FUSE_LISTXATTR = 23,
  FUSE_REMOVEXATTR = 24,
  FUSE_FLUSH = 25,
  FUSE_INIT = 26,
  FUSE_OPENDIR = 27,
  FUSE_READDIR = 28,
  FUSE_RELEASEDIR = 29,
  FUSE_FSYNCDIR = 30,
  FUSE_GETLK = 31,
  FUSE_SETLK = 32,
  FUSE_SETLKW = 33,
  FUSE_ACCESS = 34,
  FUSE_CREATE = 35,
  FUSE_INTERRUPT = 36,
  FUSE_BMAP = 37,
  FUSE_DESTROY = 38,
  FUSE_IOCTL = 39,
  FUSE_POLL = 40,
  FUSE_NOTIFY_REPLY = 41,
  FUSE_BATCH_FORGET = 42,
  FUSE_FALLOCATE = 43,
  FUSE_READDIRPLUS = 44,
  FUSE_RENAME2 = 45,
  FUSE_LSEEK = 46,
  FUSE_COPY_FILE_RANGE = 47,
  FUSE_SETUPMAPPING = 48,
  FUSE_REMOVEMAPPING = 49,
  FUSE_SYNCFS = 50,
  FUSE_TMPFILE = 51,
  FUSE_STATX = 52,
  FUSE_COPY_FILE_RANGE_64 = 53,
  FUSE_COMPOUND = 101,  // DDN redfs's number; not upstream
  CUSE_INIT = 4096,
};
// One past the largest regular opcode; sizes per-opcode tables.
inline constexpr uint32_t kOpcodeLimit = 102;

enum NotifyCode : int32_t {
  FUSE_NOTIFY_POLL = 1,
  FUSE_NOTIFY_INVAL_INODE = 2,
  FUSE_NOTIFY_INVAL_ENTRY = 3,
  FUSE_NOTIFY_STORE = 4,
  FUSE_NOTIFY_RETRIEVE = 5,
  FUSE_NOTIFY_DELETE = 6,
  FUSE_NOTIFY_RESEND = 7,
  FUSE_NOTIFY_INC_EPOCH = 8,
};

struct fuse_attr {
  uint64_t ino;
  uint64_t size;
  uint64_t blocks;
  uint64_t atime;
  uint64_t mtime;
  uint64_t ctime;
  uint32_t atimensec;
  uint32_t mtimensec;
  uint32_t ctimensec;
  uint32_t mode;
  uint32_t nlink;
  uint32_t uid;
  uint32_t gid;
  uint32_t rdev;
  uint32_t blksize;
  uint32_t flags;
};

struct fuse_kstatfs {
  uint64_t blocks;
  uint64_t bfree;
  uint64_t bavail;
  uint64_t files;
  uint64_t ffree;
  uint32_t bsize;
  uint32_t namelen;
  uint32_t frsize;
  uint32_t padding;
  uint32_t spare[6];
};

struct fuse_file_lock {
  uint64_t start;
  uint64_t end;
  uint32_t type;
  uint32_t pid;
};

struct fuse_entry_out {
  uint64_t nodeid;
  uint64_t generation;
  uint64_t entry_valid;
  uint64_t attr_valid;
  uint32_t entry_valid_nsec;
  uint32_t attr_valid_nsec;
  fuse_attr attr;
};

struct fuse_forget_in {
  uint64_t nlookup;
};
struct fuse_forget_one {
  uint64_t nodeid;
  uint64_t nlookup;
};
struct fuse_batch_forget_in {
  uint32_t count;
  uint32_t dummy;
};

struct fuse_getattr_in {
  uint32_t getattr_flags;
  uint32_t dummy;
  uint64_t fh;
};

struct fuse_attr_out {
  uint64_t attr_valid;
  uint32_t attr_valid_nsec;
  uint32_t dummy;
  fuse_attr attr;
};

struct fuse_mknod_in {
  uint32_t mode;
  uint32_t rdev;
  uint32_t umask;
  uint32_t padding;
};
struct fuse_mkdir_in {
  uint32_t mode;
  uint32_t umask;
};
struct fuse_rename_in {
  uint64_t newdir;
};
struct fuse_rename2_in {
  uint64_t newdir;
  uint32_t flags;
  uint32_t padding;
};
struct fuse_link_in {
  uint64_t oldnodeid;
};

struct fuse_setattr_in {
  uint32_t valid;
  uint32_t padding;
  uint64_t fh;
  uint64_t size;
  uint64_t lock_owner;
  uint64_t atime;
  uint64_t mtime;
  uint64_t ctime;
  uint32_t atimensec;
  uint32_t mtimensec;
  uint32_t ctimensec;
  uint32_t mode;
  uint32_t unused4;
  uint32_t uid;
  uint32_t gid;
  uint32_t unused5;
};

struct fuse_open_in {
  uint32_t flags;
  uint32_t open_flags;  // FUSE_OPEN_KILL_SUIDGID
};
struct fuse_create_in {
  uint32_t flags;
  uint32_t mode;
  uint32_t umask;
  uint32_t open_flags;
};
struct fuse_open_out {
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
};

struct fuse_release_in {
  uint64_t fh;
  uint32_t flags;
  uint32_t release_flags;
  uint64_t lock_owner;
};
struct fuse_flush_in {
  uint64_t fh;
  uint32_t unused;
  uint32_t padding;
  uint64_t lock_owner;
};

struct fuse_read_in {
  uint64_t fh;
  uint64_t offset;
  uint32_t size;
  uint32_t read_flags;
  uint64_t lock_owner;
  uint32_t flags;
  uint32_t padding;
};
struct fuse_write_in {
  uint64_t fh;
  uint64_t offset;
  uint32_t size;
  uint32_t write_flags;  // FUSE_WRITE_CACHE, FUSE_WRITE_LOCKOWNER, ...
  uint64_t lock_owner;
  uint32_t flags;  // open(2) flags of the file
  uint32_t padding;
};
struct fuse_write_out {
  uint32_t size;
  uint32_t padding;
};

struct fuse_statfs_out {
  fuse_kstatfs st;
};

struct fuse_fsync_in {
  uint64_t fh;
  uint32_t fsync_flags;
  uint32_t padding;
};

inline constexpr size_t FUSE_COMPAT_SETXATTR_IN_SIZE = 8;
struct fuse_setxattr_in {
  uint32_t size;
  uint32_t flags;
  uint32_t setxattr_flags;  // only with FUSE_SETXATTR_EXT
  uint32_t padding;
};
struct fuse_getxattr_in {
  uint32_t size;
  uint32_t padding;
};
struct fuse_getxattr_out {
  uint32_t size;
  uint32_t padding;
};

struct fuse_lk_in {
  uint64_t fh;
  uint64_t owner;
  fuse_file_lock lk;
  uint32_t lk_flags;
  uint32_t padding;
};
struct fuse_lk_out {
  fuse_file_lock lk;
};

struct fuse_access_in {
  uint32_t mask;
  uint32_t padding;
};

struct fuse_init_in {
  uint32_t major;
  uint32_t minor;
  uint32_t max_readahead;
  uint32_t flags;
  uint32_t flags2;
  uint32_t unused[11];
};
// fuse_init_in grew over time; kernels before 7.36 send only the fields up
// to `flags`.
inline constexpr size_t FUSE_COMPAT_INIT_IN_SIZE = 16;

// Protocol 7.45 layout. The opt-alignment byte `align_page_order` lives in
// the unused tail (offset 42) or, for DDN's 7.40-based ABI, where
// request_timeout is (offset 40): see AlignPageOrderOffset().
struct fuse_init_out {
  uint32_t major;
  uint32_t minor;
  uint32_t max_readahead;
  uint32_t flags;
  uint16_t max_background;
  uint16_t congestion_threshold;
  uint32_t max_write;
  uint32_t time_gran;
  uint16_t max_pages;
  uint16_t map_alignment;
  uint32_t flags2;
  uint32_t max_stack_depth;
  uint16_t request_timeout;
  uint16_t unused[11];
};

// Offset of the opt-alignment byte in fuse_init_out for a kernel speaking
// protocol 7.`kernel_minor`: request_timeout (offset 40) exists from 7.43, so
// there the byte moves to 42; older (DDN 7.40-based) kernels read it at 40.
constexpr size_t AlignPageOrderOffset(uint32_t kernel_minor) {
  return kernel_minor >= 43 ? 42 : 40;
}

// FUSE_COMPOUND: fuse_compound_in, then `count` whole sub-requests, each a
// fuse_in_header (len = header + its arguments) and its arguments, back to
// back (no padding). The reply body is fuse_compound_out, then one whole
// sub-reply per sub-request in order: fuse_out_header (len = header +
// payload, error = 0 or -errno, unique echoed) and its payload. The layout
// is DDN's (its `reserved` after result_size is 8-aligned; the padding word
// is written out here).
inline constexpr uint32_t FUSE_MAX_COMPOUND_OPS = 16;
struct fuse_compound_in {
  uint32_t count;        // sub-requests, 1..FUSE_MAX_COMPOUND_OPS
  uint32_t flags;        // none defined; ignored
  uint32_t result_size;  // sum of the sub-replies' payload sizes (a hint)
  uint32_t padding;
  uint64_t reserved;
};
struct fuse_compound_out {
  uint32_t count;  // sub-replies that follow (== the request's count)
  uint32_t flags;  // 0
  uint64_t reserved;
};

struct fuse_interrupt_in {
  uint64_t unique;
};

struct fuse_bmap_in {
  uint64_t block;
  uint32_t blocksize;
  uint32_t padding;
};
struct fuse_bmap_out {
  uint64_t block;
};

struct fuse_ioctl_in {
  uint64_t fh;
  uint32_t flags;
  uint32_t cmd;
  uint64_t arg;
  uint32_t in_size;
  uint32_t out_size;
};

struct fuse_poll_in {
  uint64_t fh;
  uint64_t kh;
  uint32_t flags;
  uint32_t events;
};
struct fuse_poll_out {
  uint32_t revents;
  uint32_t padding;
};

struct fuse_fallocate_in {
  uint64_t fh;
  uint64_t offset;
  uint64_t length;
  uint32_t mode;
  uint32_t padding;
};

struct fuse_in_header {
  uint32_t len;
  uint32_t opcode;
  uint64_t unique;
  uint64_t nodeid;
  uint32_t uid;
  uint32_t gid;
  uint32_t pid;
  uint16_t total_extlen;  // length of extensions in 8-byte units
  uint16_t padding;
};

struct fuse_out_header {
  uint32_t len;
  int32_t error;  // 0 or -errno
  uint64_t unique;
};

struct fuse_dirent {
  uint64_t ino;
  uint64_t off;
  uint32_t namelen;
  uint32_t type;
  // char name[] follows
};
inline constexpr size_t FUSE_NAME_OFFSET = sizeof(fuse_dirent);
constexpr size_t FuseDirentAlign(size_t x) {
  return (x + sizeof(uint64_t) - 1) & ~(sizeof(uint64_t) - 1);
}
constexpr size_t FuseDirentSize(size_t namelen) {
  return FuseDirentAlign(FUSE_NAME_OFFSET + namelen);
}

struct fuse_direntplus {
  fuse_entry_out entry_out;
  fuse_dirent dirent;
};
inline constexpr size_t FUSE_NAME_OFFSET_DIRENTPLUS = sizeof(fuse_direntplus);
constexpr size_t FuseDirentplusSize(size_t namelen) {
  return FuseDirentAlign(FUSE_NAME_OFFSET_DIRENTPLUS + namelen);
}

struct fuse_notify_inval_inode_out {
  uint64_t ino;
  int64_t off;
  int64_t len;
};
struct fuse_notify_inval_entry_out {
  uint64_t parent;
  uint32_t namelen;
  uint32_t flags;
};
struct fuse_notify_delete_out {
  uint64_t parent;
  uint64_t child;
  uint32_t namelen;
  uint32_t padding;
};
// Followed by `size` bytes of file data.
struct fuse_notify_store_out {
  uint64_t nodeid;
  uint64_t offset;
  uint32_t size;
  uint32_t padding;
};

struct fuse_lseek_in {
  uint64_t fh;
  uint64_t offset;
  uint32_t whence;
  uint32_t padding;
};
struct fuse_lseek_out {
  uint64_t offset;
};

struct fuse_copy_file_range_in {
  uint64_t fh_in;
  uint64_t off_in;
  uint64_t nodeid_out;
  uint64_t fh_out;
  uint64_t off_out;
  uint64_t len;
  uint64_t flags;
};
// Reply of FUSE_COPY_FILE_RANGE_64 (COPY_FILE_RANGE replies fuse_write_out).
struct fuse_copy_file_range_out {
  uint64_t bytes_copied;
};

struct fuse_syncfs_in {
  uint64_t padding;
};

// FUSE_STATX request (protocol 7.39); the reply (fuse_statx_out) is not
// served by stripefs, so only the request layout is here.
struct fuse_statx_in {
  uint32_t getattr_flags;
  uint32_t reserved;
  uint64_t fh;
  uint32_t sx_flags;
  uint32_t sx_mask;
};

// ---- FUSE-over-io-uring (protocol >= 7.42) ----
inline constexpr size_t FUSE_URING_IN_OUT_HEADER_SZ = 128;
inline constexpr size_t FUSE_URING_OP_IN_OUT_SZ = 128;

struct fuse_uring_ent_in_out {
  uint64_t flags;
  uint64_t commit_id;   // kernel-chosen id to hand back in COMMIT_AND_FETCH
  uint32_t payload_sz;  // bytes valid in the payload buffer (both ways)
  uint32_t padding;
  uint64_t reserved;
};

// First iovec of a ring entry: in_out holds fuse_in_header on requests and
// fuse_out_header on replies; op_in holds the opcode's fixed argument
// struct (e.g. fuse_write_in); the rest of the arguments (names, WRITE
// data) travel in the second iovec, the payload buffer.
struct fuse_uring_req_header {
  uint8_t in_out[FUSE_URING_IN_OUT_HEADER_SZ];
  uint8_t op_in[FUSE_URING_OP_IN_OUT_SZ];
  fuse_uring_ent_in_out ring_ent_in_out;
};

enum fuse_uring_cmd : uint32_t {
  FUSE_IO_URING_CMD_INVALID = 0,
  FUSE_IO_URING_CMD_REGISTER = 1,
  FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

// Lives in the 80-byte command area of a 128-byte SQE (IORING_SETUP_SQE128).
struct fuse_uring_cmd_req {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
inline constexpr size_t kUringSqe128CmdBytes = 80;

// ---- layout checks (uapi sizes) ----
static_assert(sizeof(fuse_attr) == 88);
static_assert(offsetof(fuse_attr, atimensec) == 48);
static_assert(offsetof(fuse_attr, flags) == 84);
static_assert(sizeof(fuse_kstatfs) == 80);
static_assert(sizeof(fuse_file_lock) == 24);
static_assert(sizeof(fuse_entry_out) == 128);
static_assert(offsetof(fuse_entry_out, attr) == 40);
static_assert(sizeof(fuse_forget_in) == 8);
static_assert(sizeof(fuse_forget_one) == 16);
static_assert(sizeof(fuse_batch_forget_in) == 8);
static_assert(sizeof(fuse_getattr_in) == 16);
static_assert(sizeof(fuse_attr_out) == 104);
static_assert(offsetof(fuse_attr_out, attr) == 16);
static_assert(sizeof(fuse_mknod_in) == 16);
static_assert(sizeof(fuse_mkdir_in) == 8);
static_assert(sizeof(fuse_rename_in) == 8);
static_assert(sizeof(fuse_rename2_in) == 16);
static_assert(sizeof(fuse_link_in) == 8);
static_assert(sizeof(fuse_setattr_in) == 88);
static_assert(offsetof(fuse_setattr_in, size) == 16);
static_assert(offsetof(fuse_setattr_in, atimensec) == 56);
static_assert(offsetof(fuse_setattr_in, mode) == 68);
static_assert(offsetof(fuse_setattr_in, uid) == 76);
static_assert(offsetof(fuse_setattr_in, gid) == 80);
static_assert(sizeof(fuse_open_in) == 8);
static_assert(sizeof(fuse_create_in) == 16);
static_assert(sizeof(fuse_open_out) == 16);
static_assert(sizeof(fuse_release_in) == 24);
static_assert(sizeof(fuse_flush_in) == 24);
static_assert(sizeof(fuse_read_in) == 40);
static_assert(sizeof(fuse_write_in) == 40);
static_assert(offsetof(fuse_write_in, size) == 16);
static_assert(offsetof(fuse_write_in, write_flags) == 20);
static_assert(offsetof(fuse_write_in, flags) == 32);
static_assert(sizeof(fuse_write_out) == 8);
static_assert(sizeof(fuse_statfs_out) == 80);
static_assert(sizeof(fuse_fsync_in) == 16);
static_assert(sizeof(fuse_setxattr_in) == 16);
static_assert(sizeof(fuse_getxattr_in) == 8);
static_assert(sizeof(fuse_getxattr_out) == 8);
static_assert(sizeof(fuse_lk_in) == 48);
static_assert(sizeof(fuse_lk_out) == 24);
static_assert(sizeof(fuse_access_in) == 8);
static_assert(sizeof(fuse_init_in) == 64);
static_assert(offsetof(fuse_init_in, flags2) == 16);
static_assert(sizeof(fuse_init_out) == 64);
static_assert(offsetof(fuse_init_out, max_background) == 16);
static_assert(offsetof(fuse_init_out, max_write) == 20);
static_assert(offsetof(fuse_init_out, time_gran) == 24);
static_assert(offsetof(fuse_init_out, max_pages) == 28);
static_assert(offsetof(fuse_init_out, flags2) == 32);
static_assert(offsetof(fuse_init_out, max_stack_depth) == 36);
static_assert(offsetof(fuse_init_out, request_timeout) == 40);
static_assert(offsetof(fuse_init_out, unused) == 42);
static_assert(AlignPageOrderOffset(45) == 42);
static_assert(AlignPageOrderOffset(40) == 40);
static_assert((FUSE_ALIGN_PG_ORDER >> 32) == (1u << 18));
static_assert((FUSE_HAS_COMPOUND >> 32) == (1u << 19));
static_assert((FUSE_URING_REDUCED_Q >> 32) == (1u << 20));
static_assert(sizeof(fuse_compound_in) == 24);
static_assert(sizeof(fuse_compound_out) == 16);
static_assert(sizeof(fuse_interrupt_in) == 8);
static_assert(sizeof(fuse_bmap_in) == 16);
static_assert(sizeof(fuse_ioctl_in) == 32);
static_assert(sizeof(fuse_poll_in) == 24);
static_assert(sizeof(fuse_fallocate_in) == 32);
static_assert(sizeof(fuse_in_header) == 40);
static_assert(offsetof(fuse_in_header, total_extlen) == 36);
static_assert(sizeof(fuse_out_header) == 16);
static_assert(sizeof(fuse_dirent) == 24);
static_assert(sizeof(fuse_direntplus) == 152);
static_assert(FuseDirentSize(1) == 32);
static_assert(FuseDirentSize(8) == 32);
static_assert(FuseDirentSize(9) == 40);
static_assert(sizeof(fuse_notify_inval_inode_out) == 24);
static_assert(sizeof(fuse_notify_inval_entry_out) == 16);
static_assert(sizeof(fuse_notify_delete_out) == 24);
static_assert(sizeof(fuse_notify_store_out) == 24);
static_assert(sizeof(fuse_lseek_in) == 24);
static_assert(sizeof(fuse_lseek_out) == 8);
static_assert(sizeof(fuse_copy_file_range_in) == 56);
static_assert(sizeof(fuse_copy_file_range_out) == 8);
static_assert(sizeof(fuse_syncfs_in) == 8);
static_assert(sizeof(fuse_statx_in) == 24);
static_assert(offsetof(fuse_statx_in, sx_mask) == 20);
static_assert(FUSE_COMPAT_INIT_IN_SIZE == offsetof(fuse_init_in, flags2));
static_assert(FUSE_COMPAT_SETXATTR_IN_SIZE ==
              offsetof(fuse_setxattr_in, setxattr_flags));
static_assert(sizeof(fuse_uring_ent_in_out) == 32);
static_assert(sizeof(fuse_uring_req_header) == 288);
static_assert(offsetof(fuse_uring_req_header, op_in) == 128);
static_assert(offsetof(fuse_uring_req_header, ring_ent_in_out) == 256);
static_assert(sizeof(fuse_uring_cmd_req) == 24);
static_assert(sizeof(fuse_uring_cmd_req) <= kUringSqe128CmdBytes);

// ---- POSIX ACL xattr values (uapi linux/posix_acl_xattr.h, acl.h) ----
// With FUSE_POSIX_ACL the kernel reads and writes ACLs as these xattrs,
// little-endian: a header, then entries sorted by tag, then id.
inline constexpr char kAclAccessXattr[] = "system.posix_acl_access";
inline constexpr char kAclDefaultXattr[] = "system.posix_acl_default";
inline constexpr uint32_t kAclXattrVersion = 0x0002;
struct posix_acl_xattr_header {
  uint32_t a_version;
};
struct posix_acl_xattr_entry {
  uint16_t e_tag;
  uint16_t e_perm;  // kAclRead | kAclWrite | kAclExecute
  uint32_t e_id;    // uid (kAclUser) or gid (kAclGroup), else undefined
};
inline constexpr uint16_t kAclUserObj = 0x01;
inline constexpr uint16_t kAclUser = 0x02;
inline constexpr uint16_t kAclGroupObj = 0x04;
inline constexpr uint16_t kAclGroup = 0x08;
inline constexpr uint16_t kAclMask = 0x10;
inline constexpr uint16_t kAclOther = 0x20;
inline constexpr uint16_t kAclRead = 0x04;
inline constexpr uint16_t kAclWrite = 0x02;
inline constexpr uint16_t kAclExecute = 0x01;
inline constexpr uint32_t kAclUndefinedId = 0xffffffffu;
static_assert(sizeof(posix_acl_xattr_header) == 4);
static_assert(sizeof(posix_acl_xattr_entry) == 8);
static_assert(offsetof(posix_acl_xattr_entry, e_id) == 4);

}  // namespace stripefs::fuse_abi

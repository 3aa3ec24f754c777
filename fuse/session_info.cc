#include "fuse/session_info.h"

namespace stripefs::fuse {

std::string InitFlagNames(uint64_t flags) {
  static const char* const kNames[64] = {
      "ASYNC_READ",
      "POSIX_LOCKS",
      "FILE_OPS",
      "ATOMIC_O_TRUNC",
      "EXPORT_SUPPORT",
      "BIG_WRITES",
      "DONT_MASK",
      "SPLICE_WRITE",
      "SPLICE_MOVE",
      "SPLICE_READ",
      "FLOCK_LOCKS",
      "HAS_IOCTL_DIR",
      "AUTO_INVAL_DATA",
      "DO_READDIRPLUS",
      "READDIRPLUS_AUTO",
      "ASYNC_DIO",
      "WRITEBACK_CACHE",
      "NO_OPEN_SUPPORT",
      "PARALLEL_DIROPS",
      "HANDLE_KILLPRIV",
      "POSIX_ACL",
      "ABORT_ERROR",
      "MAX_PAGES",
      "CACHE_SYMLINKS",
      "NO_OPENDIR_SUPPORT",
      "EXPLICIT_INVAL_DATA",
      "MAP_ALIGNMENT",
      "SUBMOUNTS",
      "HANDLE_KILLPRIV_V2",
      "SETXATTR_EXT",
      "INIT_EXT",
      "INIT_RESERVED",
      "SECURITY_CTX",
      "HAS_INODE_DAX",
      "CREATE_SUPP_GROUP",
      "HAS_EXPIRE_ONLY",
      "DIRECT_IO_ALLOW_MMAP",
      "PASSTHROUGH",
      "NO_EXPORT_SUPPORT",
      "HAS_RESEND",
      "ALLOW_IDMAP",
      "OVER_IO_URING",
      "REQUEST_TIMEOUT",
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      "ALIGN_PG_ORDER",
      "HAS_COMPOUND",
      "URING_REDUCED_Q",
  };
  std::string out;
  for (int i = 0; i < 64; ++i) {
    if (!(flags & (1ULL << i))) continue;
    if (!out.empty()) out += '|';
    out += kNames[i] ? kNames[i] : ("BIT" + std::to_string(i));
  }
  return out;
}

}  // namespace stripefs::fuse

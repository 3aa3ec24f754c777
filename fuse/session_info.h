// Value types describing a FUSE session: what the file system asks for at
// INIT (InitOptions), what the kernel offered and what was agreed
// (NegotiatedInit), and live counters (EngineStats) for `stripefs stat`.
//
// Plain values, copied freely; no ownership; safe to pass between threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fuse/fuse_abi.h"

namespace stripefs::fuse {

// What the file system asks for in the INIT reply. A wish is only granted
// when the kernel offered the matching flag; see NegotiatedInit.
struct InitOptions {
  uint32_t max_write = 1u << 20;      // bytes per WRITE
  uint32_t max_pages = 256;           // pages per request (kernel caps at
                                      // /proc/sys/fs/fuse/max_pages_limit)
  uint32_t max_readahead = 1u << 20;  // capped by what the kernel offers
  uint16_t max_background = 64;
  uint16_t congestion_threshold = 48;
  uint32_t time_gran = 1;  // ns
  bool writeback_cache = true;
  bool async_read = true;
  bool big_writes = true;
  bool parallel_dirops = true;
  bool readdirplus = true;       // with readdirplus_auto
  bool readdirplus_auto = true;  // adaptive readdirplus
  bool export_support = false;
  bool atomic_o_trunc = false;
  bool async_dio = true;
  // FUSE_HANDLE_KILLPRIV (v1): the server kills suid/sgid on every write,
  // truncate and chown, whoever the caller. Off: we do v2.
  bool handle_killpriv = false;
  // FUSE_HANDLE_KILLPRIV_V2: the kernel stops asking for
  // security.capability before every write (it sets SB_NOSEC) and instead
  // flags the requests that must kill privileges: FUSE_WRITE_KILL_SUIDGID,
  // FATTR_KILL_SUIDGID (truncate, chown) and FUSE_OPEN_KILL_SUIDGID. The
  // file system must then honour those flags (see RawFileSystem).
  bool handle_killpriv_v2 = true;
  // FUSE_POSIX_ACL: the kernel enforces POSIX ACLs (it reads
  // system.posix_acl_* through GETXATTR and turns default_permissions on);
  // the file system keeps mode and ACL in step (chmod, ACL writes) and
  // gives new inodes their parent's default ACL. Also asks for
  // FUSE_SETXATTR_EXT, which carries FUSE_SETXATTR_ACL_KILL_SGID.
  bool posix_acl = false;
  // FUSE_DONT_MASK: the kernel leaves the umask to the file system (it is
  // sent with CREATE, MKNOD and MKDIR), as a default ACL replaces it.
  bool dont_mask = false;
  bool cache_symlinks = true;
  bool no_open_support = false;
  bool no_opendir_support = false;
  bool explicit_inval_data = false;
  bool auto_inval_data = false;
  bool direct_io_allow_mmap = true;
  // opt-alignment: log2 of the alignment in BYTES (20 = 1 MiB); 0 = do not
  // request. Requested as FUSE_ALIGN_PG_ORDER with the byte at the offset
  // the kernel's protocol minor implies (fuse_abi::AlignPageOrderOffset).
  uint8_t align_page_order = 0;
  // FUSE_HAS_COMPOUND: accept FUSE_COMPOUND (the kernel of the stripefs
  // series then sends OPEN+GETATTR as one request); asked for only when the
  // kernel offers it.
  bool compound = true;
  // Ask for FUSE_OVER_IO_URING (set by the Session when its transport
  // choice wants io-uring; file systems normally leave it).
  bool over_io_uring = false;
};

// The outcome of INIT negotiation.
struct NegotiatedInit {
  // Kernel side (fuse_init_in).
  uint32_t kernel_major = 0;
  uint32_t kernel_minor = 0;
  uint32_t kernel_max_readahead = 0;
  uint64_t offered_flags = 0;  // flags | flags2 << 32 (with FUSE_INIT_EXT)
  // Reply (fuse_init_out) and what both sides now use.
  uint32_t minor = 0;            // min(ours, kernel's)
  uint64_t requested_flags = 0;  // what we asked for (before masking)
  uint64_t flags = 0;            // requested & offered (+ALIGN_PG_ORDER wish)
  uint32_t max_write = 0;
  uint32_t max_pages = 0;
  uint32_t max_readahead = 0;
  uint16_t max_background = 0;
  uint16_t congestion_threshold = 0;
  uint32_t time_gran = 0;
  // opt-alignment
  bool align_requested = false;
  bool align_acknowledged = false;  // kernel offered FUSE_ALIGN_PG_ORDER
  uint8_t align_page_order = 0;
  size_t align_offset = 0;  // where the byte went in fuse_init_out
  // io-uring
  bool uring_offered = false;
  bool uring_requested = false;

  bool Has(uint64_t flag) const { return (flags & flag) != 0; }
  bool Offered(uint64_t flag) const { return (offered_flags & flag) != 0; }
  bool writeback_cache() const { return Has(fuse_abi::FUSE_WRITEBACK_CACHE); }
};

// Names of the bits set in `flags` ("ASYNC_READ|BIG_WRITES|...").
std::string InitFlagNames(uint64_t flags);

// Counters of one transport queue (a /dev/fuse worker or an io-uring qid).
struct QueueStats {
  std::string transport;  // "dev" or "uring"
  int queue = 0;
  uint64_t requests = 0;
  uint64_t foreground = 0;
  uint64_t background = 0;  // writeback WRITEs (FUSE_WRITE_CACHE)
  // requests served per CPU (index = CPU number)
  std::vector<uint64_t> per_cpu;
};

struct EngineStats {
  bool initialized = false;
  NegotiatedInit negotiated;
  std::string transport;  // "dev" or "uring" (the one carrying requests)
  uint32_t uring_queues = 0;
  uint32_t uring_depth = 0;
  // io-uring READs served on their queue thread (alone on an idle queue) /
  // handed to the READ workers.
  uint64_t uring_reads_inline = 0;
  uint64_t uring_reads_handed = 0;
  // READs tried on their queue thread without blocking (try_reads), and of
  // those the ones the file system gave back (Replier::WouldBlock) to the
  // READ workers; tries - would_block were served inline from memory.
  uint64_t uring_read_tries = 0;
  uint64_t uring_read_would_block = 0;
  std::array<uint64_t, fuse_abi::kOpcodeLimit> per_opcode{};
  uint64_t unknown_opcode = 0;  // answered ENOSYS by the parser
  uint64_t malformed = 0;       // answered EINVAL
  uint64_t interrupts = 0;
  uint64_t reply_enoent = 0;  // reply to an already-interrupted request
  // /dev/fuse worker wake-ups that found no request (DevTransport): ~0 with
  // blocking reads, ~(idle workers - 1) per request when polling.
  uint64_t dev_empty_wakes = 0;
  // Times the /dev/fuse workers slept (voluntary context switches, each
  // ended by a wake-up): ~1 per request with blocking reads, ~dev_threads
  // per request when polling (the herd).
  uint64_t dev_worker_sleeps = 0;
  std::string dev_wait;  // "read" (blocking reads) or "poll"
  std::vector<QueueStats> queues;
};

}  // namespace stripefs::fuse

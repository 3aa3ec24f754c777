#include "fuse/init_negotiation.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT: wire names

// The INIT flags the options ask for (before masking with the offer).
uint64_t WantedFlags(const InitOptions& o, bool want_uring) {
  uint64_t want = FUSE_MAX_PAGES | FUSE_INIT_EXT;
  if (o.async_read) want |= FUSE_ASYNC_READ;
  if (o.big_writes) want |= FUSE_BIG_WRITES;
  if (o.writeback_cache) want |= FUSE_WRITEBACK_CACHE;
  if (o.parallel_dirops) want |= FUSE_PARALLEL_DIROPS;
  if (o.readdirplus) want |= FUSE_DO_READDIRPLUS;
  if (o.readdirplus && o.readdirplus_auto) want |= FUSE_READDIRPLUS_AUTO;
  if (o.export_support) want |= FUSE_EXPORT_SUPPORT;
  if (o.atomic_o_trunc) want |= FUSE_ATOMIC_O_TRUNC;
  if (o.async_dio) want |= FUSE_ASYNC_DIO;
  if (o.handle_killpriv) want |= FUSE_HANDLE_KILLPRIV;
  if (o.handle_killpriv_v2) want |= FUSE_HANDLE_KILLPRIV_V2;
  if (o.posix_acl) want |= FUSE_POSIX_ACL | FUSE_SETXATTR_EXT;
  if (o.dont_mask) want |= FUSE_DONT_MASK;
  if (o.cache_symlinks) want |= FUSE_CACHE_SYMLINKS;
  if (o.no_open_support) want |= FUSE_NO_OPEN_SUPPORT;
  if (o.no_opendir_support) want |= FUSE_NO_OPENDIR_SUPPORT;
  if (o.explicit_inval_data) want |= FUSE_EXPLICIT_INVAL_DATA;
  if (o.auto_inval_data) want |= FUSE_AUTO_INVAL_DATA;
  if (o.direct_io_allow_mmap) want |= FUSE_DIRECT_IO_ALLOW_MMAP;
  if (o.compound) want |= FUSE_HAS_COMPOUND;
  if (want_uring || o.over_io_uring) want |= FUSE_OVER_IO_URING;
  return want;
}

}  // namespace

InitNegotiation NegotiateInit(const fuse_init_in& in,
                              const InitConfig& config) {
  const InitOptions& o = config.init;
  InitNegotiation r;
  NegotiatedInit& n = r.report;
  n.kernel_major = in.major;
  n.kernel_minor = in.minor;
  n.kernel_max_readahead = in.max_readahead;
  if (in.major != kKernelVersion) {
    r.error = EPROTO;
    r.refusal = "kernel speaks FUSE major " + std::to_string(in.major) +
                ", we speak " + std::to_string(kKernelVersion) +
                "; refusing INIT";
    return r;
  }
  uint64_t offered = in.flags;
  if (in.flags & FUSE_INIT_EXT)
    offered |= static_cast<uint64_t>(in.flags2) << 32;
  n.offered_flags = offered;

  const uint64_t want = WantedFlags(o, config.want_uring);
  uint64_t flags = want & offered;
  n.uring_offered = (offered & FUSE_OVER_IO_URING) != 0;
  n.uring_requested = (want & FUSE_OVER_IO_URING) != 0;

  // opt-alignment: requested even when not offered (DDN's kernel honours it
  // without offering); acknowledged only when the kernel offered the flag.
  if (o.align_page_order != 0) {
    flags |= FUSE_ALIGN_PG_ORDER;
    n.align_requested = true;
    n.align_page_order = o.align_page_order;
    n.align_offset = AlignPageOrderOffset(in.minor);
  }
  n.align_acknowledged = n.align_requested && (offered & FUSE_ALIGN_PG_ORDER);
  n.requested_flags = want | (n.align_requested ? FUSE_ALIGN_PG_ORDER : 0);
  n.flags = flags;

  n.minor = std::min(in.minor, kKernelMinorVersion);
  // The reply asks for max_pages (the kernel caps it at its limit); the
  // report says what the kernel will use.
  const uint32_t max_pages =
      std::min<uint32_t>(std::max<uint32_t>(o.max_pages, 1), 65535);
  n.max_pages = std::min(max_pages, config.max_pages_limit);
  n.max_write = std::max<uint32_t>(4096, o.max_write);
  n.max_readahead = std::min(o.max_readahead, in.max_readahead);
  n.max_background = o.max_background;
  n.congestion_threshold = o.congestion_threshold;
  n.time_gran = o.time_gran ? o.time_gran : 1;

  fuse_init_out out{};
  out.major = kKernelVersion;
  out.minor = kKernelMinorVersion;
  out.max_readahead = n.max_readahead;
  out.flags = static_cast<uint32_t>(flags);
  out.flags2 = static_cast<uint32_t>(flags >> 32);
  out.max_background = n.max_background;
  out.congestion_threshold = n.congestion_threshold;
  out.max_write = n.max_write;
  out.time_gran = n.time_gran;
  out.max_pages = static_cast<uint16_t>(max_pages);
  static_assert(sizeof(out) == std::tuple_size_v<decltype(r.reply)>);
  std::memcpy(r.reply.data(), &out, sizeof(out));
  if (n.align_requested) r.reply[n.align_offset] = o.align_page_order;
  return r;
}

}  // namespace stripefs::fuse

// Replier: the one-shot handle a file system uses to answer a FUSE request,
// now or later, from any thread.
//
// Every RawFileSystem call that expects an answer receives a Replier by
// value. Call exactly one reply method (Error/Entry/Attr/Data/...) once; the
// Replier is then spent. It is move-only; a Replier destroyed without a reply
// answers EIO and logs, so a forgotten reply never hangs the caller.
//
// Lifetime: request arguments handed to the file system (names, WRITE data)
// point into the transport's buffer and stay valid until the Replier replies
// or is destroyed; copy them if you need them longer, or take the buffer
// over with KeepRequestBuffer() (before the reply).
//
// Replies are built without copying large payloads: Data()/DataV() take
// spans/iovecs that go straight to writev (/dev/fuse) or are placed in the
// ring payload buffer (io-uring). ReplyBuffer(n) hands out a transport-owned
// buffer to fill in place (io-uring: the ring payload buffer itself, so a
// READ filled there is never copied again).
//
// Thread-safety: a Replier may be used on any thread, but by one thread at a
// time (it is a value, not shared).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/buffer_pool.h"
#include "common/status.h"
#include "fuse/fuse_abi.h"

namespace stripefs::fuse {

// Who asked and where the request came from.
struct RequestContext {
  uint64_t unique = 0;
  uint64_t nodeid = 0;
  uint32_t opcode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t pid = 0;
  int queue = 0;       // transport queue index (dev worker or io-uring qid)
  int cpu = -1;        // CPU the request was dispatched on (sched_getcpu)
  bool uring = false;  // arrived through io-uring
  bool background = false;  // writeback WRITE (FUSE_WRITE_CACHE)
  // Run inline on an io-uring queue thread: the file system must not wait
  // (disk, network, locks held by others) while serving it. If it cannot
  // answer from memory, it calls Replier::WouldBlock() and the request is
  // served again on a worker thread, with `retried` set and this cleared.
  bool must_not_block = false;
  bool retried = false;  // given back once (Replier::WouldBlock)

  // The caller's identity and target from a request's header.
  void SetFromHeader(const fuse_abi::fuse_in_header& h) {
    unique = h.unique;
    nodeid = h.nodeid;
    opcode = h.opcode;
    uid = h.uid;
    gid = h.gid;
    pid = h.pid;
  }
};

// Transport side of one in-flight request (implemented by transports; file
// systems never see it). Complete() sends the reply and releases the
// transport's resources (buffer, ring entry); it is called exactly once.
class InFlight {
 public:
  virtual ~InFlight() = default;
  // `error` is 0 or a positive errno. `payload` is the reply body (may
  // include spans inside ScratchBuffer()).
  virtual void Complete(int error, std::span<const iovec> payload) = 0;
  // A buffer of at least `n` bytes that may be filled in place and passed to
  // Complete() without another copy; empty span when n is too large.
  virtual std::span<uint8_t> ScratchBuffer(size_t n) = 0;
  // Hands the buffer the request was read into to the caller: its bytes
  // (WRITE data) stay where they are, valid while the lease lives, also
  // after Complete(). Empty when the transport cannot (io-uring: the
  // payload is the ring entry's registered buffer, which the kernel reuses
  // for the next request once the reply is committed) or will not (its
  // bound of kept buffers is reached). Call before Complete(), at most once.
  virtual BufferPool::Lease KeepRequestBuffer() { return {}; }
  // Replier::WouldBlock of a request with ctx.must_not_block: the transport
  // dispatches it again on a thread that may block (ctx.retried set,
  // must_not_block cleared); nothing is sent to the kernel. Transports
  // that never set must_not_block keep this default, which logs and
  // answers EIO (a file system's bug, never EAGAIN to the kernel).
  virtual void GiveBack();

  RequestContext ctx;
  std::atomic<bool> interrupted{false};
  // When the Session handed the request to the file system (set only when
  // a RequestObserver wants latencies).
  std::chrono::steady_clock::time_point tracked_at{};
};

// Told right before a reply leaves, on the replying thread (the Session
// uses it to forget the request for INTERRUPT). Must be thread-safe and
// outlive every Replier that points at it.
class ReplyObserver {
 public:
  virtual void OnReply(InFlight* inflight) = 0;

 protected:
  ~ReplyObserver() = default;
};

class Replier {
 public:
  Replier() = default;
  // `observer` may be null (tests, requests nobody tracks).
  Replier(InFlight* inflight, ReplyObserver* observer)
      : inflight_(inflight), observer_(observer) {}
  Replier(Replier&& o) noexcept { *this = std::move(o); }
  Replier& operator=(Replier&& o) noexcept;
  Replier(const Replier&) = delete;
  Replier& operator=(const Replier&) = delete;
  ~Replier();

  const RequestContext& ctx() const;
  // True once the kernel sent an INTERRUPT for this request; the file
  // system may then answer EINTR early.
  bool interrupted() const;
  // False after a reply was sent (or for a default-constructed Replier).
  bool valid() const { return inflight_ != nullptr; }

  // ---- reply methods: call exactly one, once ----
  void Error(int err);  // positive errno, or 0 for success without body
  void Ok() { Error(0); }
  void FromStatus(const Status& s) { Error(s.ok() ? 0 : s.code()); }
  void Entry(const fuse_abi::fuse_entry_out& e);
  void Attr(const fuse_abi::fuse_attr_out& a);
  void Open(const fuse_abi::fuse_open_out& o);
  void Create(const fuse_abi::fuse_entry_out& e,
              const fuse_abi::fuse_open_out& o);
  void Written(uint32_t size);  // WRITE
  void Statfs(const fuse_abi::fuse_kstatfs& st);
  void XattrSize(uint32_t size);  // GETXATTR/LISTXATTR with size == 0
  void Lseek(uint64_t offset);
  void CopyFileRange(uint64_t bytes);  // COPY_FILE_RANGE(_64)
  // Raw body: READ data, READLINK target, xattr value/list, READDIR(PLUS)
  // entries. Not copied before the transport needs it.
  void Data(std::span<const uint8_t> bytes);
  void Data(std::string_view s) {
    Data(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()),
                                  s.size()));
  }
  void DataV(std::span<const iovec> iov);
  // Sends an arbitrary struct as the body.
  template <typename T>
  void Struct(const T& t) {
    Data(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&t),
                                  sizeof(T)));
  }

  // Transport-owned buffer of at least n bytes to build a reply in place
  // (pass a sub-span to Data()). Valid until the reply. Empty if too big.
  std::span<uint8_t> ReplyBuffer(size_t n);
  // Takes over the request's buffer (InFlight::KeepRequestBuffer): the
  // request's arguments (WRITE data) stay valid while the returned lease
  // lives, after the reply too. Empty lease = not possible, copy instead.
  // Before the reply only; at most once.
  BufferPool::Lease KeepRequestBuffer();

  // Not a reply: "this request cannot be served without blocking". Only
  // for a request with ctx().must_not_block (after one, the request is
  // dispatched again on a worker thread that may block, with
  // ctx().retried set); for any other request it logs and answers EIO.
  // The Replier is spent either way. Never sends EAGAIN to the kernel.
  void WouldBlock();

 private:
  void Send(int error, std::span<const iovec> iov);

  InFlight* inflight_ = nullptr;
  ReplyObserver* observer_ = nullptr;
};

}  // namespace stripefs::fuse

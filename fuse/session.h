// Session: one served FUSE connection. Negotiates INIT (NegotiateInit,
// init_negotiation.h), parses every request (request_parser.h), calls the
// handler of its opcode_table.h row (which calls the RawFileSystem), tracks
// in-flight requests for INTERRUPT (as the Repliers' ReplyObserver), and
// keeps per-opcode and per-queue counters.
//
// Usage (see docs/fuse-engine.md):
//   auto mount = FuseMount::Mount("/mnt/x", mount_opts);   // fuse_mount.h
//   Session session(&my_fs, session_opts);
//   session.Start(mount->fd());
//   ... session.Wait();          // returns on unmount or Stop()
//   mount.reset();               // unmounts (after the session stopped)
//
// Transports: requests always start on /dev/fuse (DevTransport, INIT comes
// there); with TransportChoice kUring/kAuto and a kernel that offers
// FUSE_OVER_IO_URING, a UringTransport is started right after the INIT reply
// and carries the requests from then on (FORGET/INTERRUPT stay on
// /dev/fuse).
//
// Ownership: the Session does not own the file system or the fd; both must
// outlive it. Thread-safety: Start/Wait/destructor from one controlling
// thread; Stop() from anywhere including signal handlers; Stats() and
// negotiated() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "fuse/raw_file_system.h"
#include "fuse/request_parser.h"
#include "fuse/session_info.h"
#include "fuse/transport.h"

namespace stripefs::fuse {

enum class TransportChoice { kAuto, kDev, kUring };
// "auto" | "dev" | "uring".
Result<TransportChoice> ParseTransportChoice(std::string_view s);
std::string_view TransportChoiceName(TransportChoice c);
// auto -> uring when the kernel offered FUSE_OVER_IO_URING, else dev.
// kUring without the offer falls back to dev (the Session logs why).
bool ShouldUseUring(TransportChoice c, bool kernel_offers_uring);

// The io-uring queues a session registers (qid 0..queues-1).
struct UringQueuePlan {
  int queues = 0;
  std::string message;  // one line to log, empty when there is nothing to say
};
// `requested` 0 (or >= cpus) = one queue per possible CPU. Fewer than `cpus`
// only if the kernel offered FUSE_URING_REDUCED_Q (`reduced_offered`, fuse.ko
// patch 7): any other kernel never makes such a ring ready and every request
// after INIT would wait forever, so the request is then ignored (one queue
// per CPU) and the message says so. cpus >= 1.
UringQueuePlan PlanUringQueues(int cpus, int requested, bool reduced_offered);

// Told, on the replying thread, when the file system answers a request:
// its opcode and the time from dispatch to the reply (for latency
// histograms). Must be thread-safe and outlive the Session.
class RequestObserver {
 public:
  virtual void OnRequestDone(uint32_t opcode,
                             std::chrono::nanoseconds latency) = 0;

 protected:
  ~RequestObserver() = default;
};

struct SessionOptions {
  InitOptions init;
  TransportChoice transport = TransportChoice::kAuto;
  int dev_threads = 2;  // /dev/fuse workers
  // /dev/fuse workers poll() a non-blocking fd (every request wakes every
  // idle worker) instead of blocking reads (one wake per request); for A/B.
  bool dev_poll = false;
  int uring_queue_depth = 8;   // entries per io-uring queue
  // io-uring queues, qid 0..n-1 on CPUs 0..n-1; 0 = one per possible CPU.
  // Fewer than the CPUs only if the kernel offers FUSE_URING_REDUCED_Q
  // (stripefs patch 7), else one per CPU and a log line (PlanUringQueues).
  int uring_queues = 0;
  int uring_read_workers = 4;  // threads serving io-uring READs (0: inline)
  bool uring_inline_lone_reads = true;  // UringTransportOptions'
  // UringTransportOptions::try_reads: READs tried on the queue thread
  // (ctx.must_not_block). Only for a file system that honours it.
  bool uring_try_reads = false;
  bool uring_pin_threads = true;
  bool log_requests = false;  // one stderr line per request (debug)
  // Answer every FUSE_COMPOUND with ENOSYS (the kernel then falls back to
  // single requests for good). With init.compound on, the kernel is told
  // compounds are welcome first: this is how the fallback is tested.
  bool refuse_compound = false;
  RequestObserver* request_observer = nullptr;  // not owned; may be null
};

class Session : public RequestSink {
 public:
  Session(RawFileSystem* fs, SessionOptions opts);
  ~Session() override;  // Stop() + join all threads
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts serving `fuse_fd` (not owned; its O_NONBLOCK flag is set by the
  // DevTransport: cleared for blocking reads, set with dev_poll). Returns
  // immediately; requests are served on transport threads.
  Status Start(int fuse_fd);
  // Ends the session: wakes every transport thread. Async-signal-safe.
  void Stop();
  // Blocks until the session ended (unmounted, aborted or Stop()) and all
  // threads are joined. Returns why it ended (OK for unmount/Stop).
  Status Wait();
  // Waits until INIT was answered; false on timeout or if the session ended.
  bool WaitForInit(std::chrono::milliseconds timeout);

  bool initialized() const { return initialized_.load(); }
  NegotiatedInit negotiated() const;
  // "dev" or "uring": the transport carrying requests now.
  std::string active_transport() const;
  EngineStats Stats() const;

  // ---- notifications to the kernel (written on /dev/fuse, unique 0) ----
  // Drop cached data of `ino` in [off, off+len) (len < 0: to the end; off
  // < 0: attributes only). Do not call it from a handler of a request on
  // the same inode that holds the kernel's inode lock (e.g. WRITE): it may
  // wait for that request. ENOENT = the kernel does not know the inode.
  Status NotifyInvalInode(uint64_t ino, int64_t off, int64_t len);
  // Put `data` into the kernel's page cache of `ino` at `offset`, raising
  // its i_size to offset + size if below (never lowering it). Locks the
  // pages it fills: do not call it where a READ of those pages may wait for
  // the caller. ENOENT = the kernel does not know the inode.
  Status NotifyStore(uint64_t ino, uint64_t offset,
                     std::span<const uint8_t> data);
  // Drop the cached dentry `name` in directory `parent`.
  Status NotifyInvalEntry(uint64_t parent, std::string_view name);
  // Like NotifyInvalEntry, and also tells the kernel `child` was deleted.
  Status NotifyDelete(uint64_t parent, uint64_t child, std::string_view name);

  // ---- RequestSink (called by transports) ----
  void Dispatch(InFlight* inflight, const fuse_abi::fuse_in_header& h,
                std::span<const uint8_t> arg0,
                std::span<const uint8_t> rest) override;
  void DispatchDevBuffer(InFlight* inflight,
                         std::span<const uint8_t> buf) override;
  void TransportEnded(std::string_view transport, Status why) override;

 private:
  struct Impl;
  void HandleInit(InFlight* f, const ParsedRequest& q);
  // Switches to io-uring when the options and the kernel's offer say so.
  void StartUringAfterInit(const NegotiatedInit& n);
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> initialized_{false};
};

}  // namespace stripefs::fuse

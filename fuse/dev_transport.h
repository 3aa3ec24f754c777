// DevTransport: the classic /dev/fuse transport.
//
// A pool of worker threads; each reads whole requests into its own buffer
// (sized for max_pages * 4096 + headers), dispatches them to the
// RequestSink, and replies with one writev (header + struct + payload, no
// copy of READ data). A request answered later (asynchronously) keeps its
// buffer until the reply; the worker takes a fresh one meanwhile.
//
// Request buffers come from a BufferPool placed so that a WRITE's payload
// (kWritePayloadOffset = fuse_in_header + fuse_write_in bytes in) starts
// 4 KiB-aligned: whole cells of a whole-stripe WRITE are page-aligned, so
// they can be encoded and written with O_DIRECT where they are. (A request
// with extension headers shifts its payload; nothing relies on alignment
// for correctness.)
//
// Kept buffers: a WRITE handler may take the request's buffer over
// (InFlight::KeepRequestBuffer, via Replier): the payload then stays valid
// after the reply, for as long as the returned lease lives, and goes back
// to the pool when it is released; the worker reads its next request into
// another pooled buffer. Memory stays bounded: a keep is refused (empty
// lease: the handler copies instead) once threads + max_kept_buffers
// buffers are out of the pool (being read into, in flight, kept), so at
// most max_kept_buffers are kept; workers never wait for a buffer.
// Concurrent keeps may overshoot that by at most threads - 1.
//
// Waiting (DevWait): kBlockingRead (default) = every worker sits in a
// blocking read() on the fd. The kernel queues such readers as *exclusive*
// waiters on the connection's input queue (fs/fuse/dev.c fuse_dev_do_read:
// wait_event_interruptible_exclusive_locked(fiq->waitq)), and a new request
// (wake_up(&fiq->waitq)) wakes exactly one of them, which then gets that
// request: one wake-up per request. kPoll = the old loop: the fd is
// O_NONBLOCK and every worker poll()s it with the stop eventfd; poll waiters
// are not exclusive, so each request wakes every idle worker and all but
// one read EAGAIN (counted in empty_wakes). Cloned fds (FUSE_DEV_IOC_CLONE)
// would not help: clones share the connection's one input queue.
//
// Stop: Stop() writes the stop eventfd (async-signal-safe). With blocking
// reads a stopper thread polls that eventfd and then interrupts the
// blocked readers with kDevWakeSignal (a no-op handler installed without
// SA_RESTART, so read() returns EINTR), repeating every millisecond until
// every worker has left (a signal that lands between two reads is lost, the
// next one is not). read() ENODEV = unmounted/aborted -> clean stop (the
// kernel wakes all readers then); ENOENT on writev = request was
// interrupted/aborted -> tolerated. If kDevWakeSignal already has a handler
// that is not ours, Start() falls back to kPoll (logged).
//
// Join() also waits until every request handed out was completed (the file
// system may answer asynchronously), so no reply can touch a dead transport.
// Owns its threads and buffers, not the fds (it changes the fuse fd's
// O_NONBLOCK flag). Thread-safe as a Transport.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/buffer_pool.h"
#include "fuse/transport.h"

namespace stripefs::fuse {

enum class DevWait {
  kBlockingRead,  // one exclusive waiter per worker: one wake per request
  kPoll,          // poll() + O_NONBLOCK read: every idle worker wakes
};

// The signal that interrupts blocked readers at Stop (SIGRTMIN + 5).
int DevWakeSignal();

struct DevTransportOptions {
  int threads = 2;
  DevWait wait = DevWait::kBlockingRead;
  size_t buffer_size = (256 + 1) * 4096;  // >= max request incl. headers
  int first_queue = 0;                    // queue index of worker 0 in counters
  // Request buffers a file system may keep past the reply (see above).
  size_t max_kept_buffers = 16;
};

// Where a WRITE's data starts in a /dev/fuse request without extensions.
inline constexpr size_t kWritePayloadOffset =
    sizeof(fuse_abi::fuse_in_header) + sizeof(fuse_abi::fuse_write_in);

class DevTransport : public Transport {
 public:
  // `fuse_fd` and `stop_fd` (eventfd, readable = stop) are not owned.
  DevTransport(int fuse_fd, int stop_fd, DevTransportOptions opts);
  ~DevTransport() override;

  std::string_view name() const override { return "dev"; }
  Status Start(RequestSink* sink) override;
  void Stop() override;
  void Join() override;
  int queue_count() const override { return opts_.threads; }

  // Buffer pool (shared by workers, async replies and kept buffers).
  BufferPool::Lease TakeBuffer() { return pool_.Get(); }
  // A request buffer for a file system that keeps it (see above); empty
  // when the bound is reached.
  BufferPool::Lease Keep(BufferPool::Lease& buf);
  // Buffers out of the pool now (reading, in flight, kept).
  size_t buffers_out() const { return pool_.outstanding(); }
  // Keeps granted / refused at the bound.
  uint64_t kept() const { return kept_.load(); }
  uint64_t keep_refused() const { return keep_refused_.load(); }
  // Sends one reply (header filled here); returns errno (0 ok, ENOENT ok).
  int WriteReply(uint64_t unique, int error, std::span<const iovec> payload);
  size_t buffer_size() const { return opts_.buffer_size; }
  std::atomic<uint64_t>& reply_enoent() { return reply_enoent_; }
  // Worker wake-ups that found no request (read() EAGAIN, or EINTR while
  // not stopping): ~0 with kBlockingRead, ~(idle workers - 1) per request
  // with kPoll.
  uint64_t empty_wakes() const { return empty_wakes_.load(); }
  // Times the workers went to sleep (their voluntary context switches, from
  // /proc/self/task/<tid>/status; each is followed by one wake-up): ~1 per
  // request with kBlockingRead, ~threads per request with kPoll (a woken
  // poller that finds the request taken sleeps again inside poll(), so
  // empty_wakes does not see that herd; this does). Reads /proc: for stats.
  uint64_t worker_sleeps() const;
  // The wait mode in use (kPoll after a fallback).
  DevWait wait_mode() const { return opts_.wait; }
  // Requests handed to the sink and not completed yet.
  std::atomic<int>& outstanding() { return outstanding_; }

 private:
  static DevTransportOptions Clamped(DevTransportOptions o);
  void Worker(int index);
  void Stopper();

  int fd_;
  int stop_fd_;
  DevTransportOptions opts_;
  RequestSink* sink_ = nullptr;
  std::vector<std::thread> threads_;
  std::vector<pthread_t> handles_;            // workers, for the wake signal
  std::unique_ptr<std::atomic<int>[]> tids_;  // workers' kernel thread ids
  std::thread stopper_;
  BufferPool pool_;
  std::atomic<uint64_t> kept_{0};
  std::atomic<uint64_t> keep_refused_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> running_{0};
  std::atomic<uint64_t> reply_enoent_{0};
  std::atomic<uint64_t> empty_wakes_{0};
  std::atomic<int> outstanding_{0};
};

}  // namespace stripefs::fuse

// UringTransport: FUSE-over-io-uring (Linux >= 6.14, protocol >= 7.42).
//
// One queue per possible CPU by default, or `queues` of them on CPUs 0..n-1
// (a kernel with stripefs patch 7 maps the other CPUs onto those; stock 7.2
// never makes such a ring ready, so Session only asks for fewer when INIT
// offered FUSE_URING_REDUCED_Q; the kernel picks queue = task_cpu() of the
// requesting task), each served by its own thread pinned to that CPU with
// its own io_uring (IORING_SETUP_SQE128). Each queue registers `depth`
// entries: IORING_OP_URING_CMD on the /dev/fuse fd, cmd_op REGISTER, a
// fuse_uring_cmd_req in the 80-byte command area and an iovec pair
// (288-byte fuse_uring_req_header + payload buffer). A completion carries a
// request; the reply goes back with COMMIT_AND_FETCH (commit_id from the
// entry), which also fetches the next request.
//
// With try_reads, such a READ is first run on the queue thread with
// ctx.must_not_block: served from memory there (no hand-over, no wake-up),
// or given back by the file system (Replier::WouldBlock) and then handed
// to the workers with ctx.retried (counted: read_tries, read_would_block).
//
// READs are handed to `read_workers` threads (shared by all queues), so a
// queue serves several at once; other requests, and a READ that arrives
// alone on an otherwise idle queue (QD1: no hand-over wake-up), are answered
// on the queue thread. Known limit: while such a READ waits on servers, a
// request that arrives on the same queue (same CPU) waits for it. A reply may
// come from any thread (Replier contract), but the kernel runs the fetch half
// of a COMMIT_AND_FETCH in the submitting thread's context and cancels the
// entry for good when that thread exits. So only threads that live as long as
// the transport (queue threads, READ workers) submit commits, under the queue's
// mutex; any other thread hands the finished entry to its queue thread (list +
// eventfd polled by the ring). An entry belongs to the file system from its CQE
// until its reply; the queue thread leaves only when no entry is held.
//
// Must be started only after the INIT reply granting FUSE_OVER_IO_URING was
// written. Stop(): the session's stop eventfd is polled by every ring.
// Teardown closes rings (the kernel cancels idle entries). Owns threads,
// rings and buffers; not the fds.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "fuse/request_parser.h"
#include "fuse/transport.h"

namespace stripefs::fuse {

struct UringTransportOptions {
  int queues = 0;        // 0 = number of possible CPUs (what stock 7.2 needs)
  int depth = 8;         // entries per queue
  int read_workers = 4;  // threads serving READs; 0 = on the queue thread
  // With read workers: a READ that arrives alone on an idle queue is served
  // on the queue thread (saves a wake-up); false hands every READ over.
  bool inline_lone_reads = true;
  // With read workers: a READ that would be handed over is first tried on
  // the queue thread with ctx.must_not_block set; the file system answers
  // it from memory or gives it back (Replier::WouldBlock), and then it is
  // handed to the workers (ctx.retried). Only for a file system that
  // honours must_not_block.
  bool try_reads = false;
  size_t payload_size = 1u << 20;  // >= max(8 KiB, max_write, max_pages*4K)
  bool pin_threads = true;
  int first_queue = 0;  // index of qid 0 in the session's counters
  // The connection's negotiated parse options (known after INIT): they
  // decide how much of a ring entry's op_in area is the argument struct
  // (e.g. SETXATTR's 16-byte form with FUSE_SETXATTR_EXT).
  ParseOptions parse;
};

// Number of possible CPUs (/sys/devices/system/cpu/possible).
int PossibleCpuCount();

class UringTransport : public Transport {
 public:
  UringTransport(int fuse_fd, int stop_fd, UringTransportOptions opts);
  ~UringTransport() override;

  std::string_view name() const override { return "uring"; }
  // Starts queue threads and waits until every queue registered its
  // entries (or failed: the error says which queue and why).
  Status Start(RequestSink* sink) override;
  void Stop() override;
  void Join() override;
  int queue_count() const override { return opts_.queues; }
  int depth() const { return opts_.depth; }
  // READs served on a queue thread / handed to the READ workers.
  uint64_t reads_inline() const { return reads_inline_.load(); }
  uint64_t reads_handed() const { return reads_handed_.load(); }
  // READs tried on a queue thread (try_reads) / of those, given back.
  uint64_t read_tries() const { return read_tries_.load(); }
  uint64_t read_would_block() const { return read_would_block_.load(); }

  struct Queue;
  class ReadWorkers;

 private:
  int fd_;
  int stop_fd_;
  UringTransportOptions opts_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::unique_ptr<ReadWorkers> read_workers_;
  std::atomic<uint64_t> reads_inline_{0};
  std::atomic<uint64_t> reads_handed_{0};
  std::atomic<uint64_t> read_tries_{0};
  std::atomic<uint64_t> read_would_block_{0};
};

}  // namespace stripefs::fuse

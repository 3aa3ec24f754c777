#include "fuse/uring_transport.h"

#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <string>

#include "fuse/request_parser.h"

namespace stripefs::fuse {

using namespace fuse_abi;  // NOLINT

namespace {

constexpr uint64_t kStopTag = 1;  // user_data of the stop-eventfd polls
constexpr uint64_t kWakeTag = 2;  // user_data of the commit-wake poll

// The transport whose ring commits this thread may submit itself: set on
// queue threads and on the transport's READ workers, which all live until
// Join. Any other thread hands its reply to the queue thread (see Complete).
thread_local const UringTransport* tls_submitter = nullptr;

size_t RoundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

int PossibleCpuCount() {
  // Format: "0-1" or "0,2-5".
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string s;
  if (!(in >> s)) {
    long n = ::sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? static_cast<int>(n) : 1;
  }
  int max_cpu = -1;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string part = s.substr(pos, end - pos);
    size_t dash = part.find('-');
    int hi = std::atoi(dash == std::string::npos ? part.c_str()
                                                 : part.c_str() + dash + 1);
    if (hi > max_cpu) max_cpu = hi;
    pos = end + 1;
  }
  return max_cpu + 1;
}

// One ring entry: header + payload registered with the kernel.
class UringEntry final : public InFlight {
 public:
  UringEntry(UringTransport::Queue* q, size_t payload_size);
  ~UringEntry() override;
  bool ok() const { return hdr_ && payload_; }

  void Complete(int error, std::span<const iovec> payload) override;
  std::span<uint8_t> ScratchBuffer(size_t n) override;
  // A tried READ (must_not_block) the file system gave back: to the READ
  // workers, retried.
  void GiveBack() override;

  void PrepRegister(io_uring_sqe* sqe, uint16_t qid);
  void PrepCommit(io_uring_sqe* sqe, uint16_t qid);

  fuse_uring_req_header* hdr_ = nullptr;
  uint8_t* payload_ = nullptr;
  size_t payload_size_;
  iovec iov_[2];
  uint64_t commit_id_ = 0;
  // The request as dispatched (for GiveBack's second dispatch).
  fuse_in_header h_{};
  size_t fixed_ = 0;
  size_t psz_ = 0;
  bool payload_in_use_ = false;  // request args live in the payload
  std::unique_ptr<uint8_t[]> scratch_;
  size_t scratch_size_ = 0;
  UringTransport::Queue* q_;
};

struct UringTransport::Queue {
  UringTransport* t = nullptr;
  RequestSink* sink = nullptr;
  int qid = 0;
  int fuse_fd = -1;
  int session_stop_fd = -1;
  int own_stop_fd = -1;
  io_uring ring{};
  bool ring_ok = false;
  std::mutex mu;  // guards SQE preparation and submission
  pthread_t tid{};
  std::thread thread;
  std::vector<std::unique_ptr<UringEntry>> entries;
  // Replies written by threads that must not submit (see Complete): the
  // queue thread commits them after `wake_fd` fires. Guarded by mu.
  std::vector<UringEntry*> to_commit;
  int wake_fd = -1;
  std::atomic<int> busy{0};
  int dead = 0;
  ReadWorkers* read_workers = nullptr;  // the transport's, or null
  size_t payload_size = 0;
  ParseOptions parse;  // the connection's, from UringTransportOptions
  int depth = 0;
  bool pin = true;
  bool on_queue_thread() const { return pthread_equal(pthread_self(), tid); }

  // start handshake
  std::mutex start_mu;
  std::condition_variable start_cv;
  bool started = false;
  Status start_status;

  Status Setup();
  void Run();
  void Loop();
  void PrepWakePollLocked();
  void CommitHandedOverLocked();
  void Serve(UringEntry* e, const fuse_in_header& h, size_t fixed,
             size_t payload);
  // A tried READ given back (UringEntry::GiveBack): to the READ workers.
  void HandOverTried(UringEntry* e);
  void SubmitLocked() {
    int r = io_uring_submit(&ring);
    if (r < 0 && r != -EBUSY && r != -EAGAIN) {
      std::fprintf(stderr, "stripefs-fuse: uring q%d submit failed: %s\n", qid,
                   std::strerror(-r));
    }
  }
};

// READ requests handed over by queue threads: a fixed set of threads, so
// several READs of one queue are served at once. The workers reply (and
// submit the commit) themselves; they live until the transport's Join.
class UringTransport::ReadWorkers {
 public:
  struct Job {
    Queue* q;
    UringEntry* e;
    fuse_in_header h;
    size_t fixed;
    size_t payload;
  };
  ReadWorkers(const UringTransport* owner, int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, owner] {
        tls_submitter = owner;
        Run();
      });
    }
  }
  ~ReadWorkers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Push(const Job& j) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(j);
    }
    cv_.notify_one();
  }

 private:
  void Run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool done_ = false;
  std::vector<std::thread> threads_;
};

UringEntry::UringEntry(UringTransport::Queue* q, size_t payload_size)
    : payload_size_(payload_size), q_(q) {
  hdr_ = static_cast<fuse_uring_req_header*>(
      std::aligned_alloc(4096, RoundUp(sizeof(fuse_uring_req_header), 4096)));
  payload_ = static_cast<uint8_t*>(
      std::aligned_alloc(4096, RoundUp(payload_size, 4096)));
  if (hdr_) std::memset(hdr_, 0, sizeof(*hdr_));
  iov_[0] = iovec{hdr_, sizeof(fuse_uring_req_header)};
  iov_[1] = iovec{payload_, payload_size_};
}

UringEntry::~UringEntry() {
  std::free(hdr_);
  std::free(payload_);
}

static void PrepCmd(io_uring_sqe* sqe, int fd, uint32_t cmd_op, uint16_t qid,
                    uint64_t commit_id, void* user) {
  // SQE128: 128 bytes per SQE; the 80-byte command area starts at cmd.
  // Launder the pointer so the compiler does not bound it by sizeof(*sqe).
  uint8_t* raw = reinterpret_cast<uint8_t*>(sqe);
  asm("" : "+r"(raw));
  std::memset(raw, 0, 128);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = cmd_op;
  fuse_uring_cmd_req req{};
  req.qid = qid;
  req.commit_id = commit_id;
  std::memcpy(raw + offsetof(io_uring_sqe, cmd), &req, sizeof(req));
  io_uring_sqe_set_data(sqe, user);
}

void UringEntry::PrepRegister(io_uring_sqe* sqe, uint16_t qid) {
  PrepCmd(sqe, q_->fuse_fd, FUSE_IO_URING_CMD_REGISTER, qid, 0, this);
  sqe->addr = reinterpret_cast<uint64_t>(iov_);
  sqe->len = 2;
}

void UringEntry::PrepCommit(io_uring_sqe* sqe, uint16_t qid) {
  PrepCmd(sqe, q_->fuse_fd, FUSE_IO_URING_CMD_COMMIT_AND_FETCH, qid, commit_id_,
          this);
}

std::span<uint8_t> UringEntry::ScratchBuffer(size_t n) {
  // When the request carried no payload (READ, READDIR, READLINK, ...) the
  // ring payload buffer itself is handed out: filled in place, never copied.
  if (!payload_in_use_ && n <= payload_size_) return {payload_, n};
  if (n > payload_size_) return {};
  if (scratch_size_ < n) {
    scratch_.reset(new uint8_t[n]);
    scratch_size_ = n;
  }
  return {scratch_.get(), n};
}

void UringEntry::Complete(int error, std::span<const iovec> payload) {
  if (error == kNoReply) error = 0;
  size_t total = 0;
  if (error == 0) {
    for (const iovec& v : payload) total += v.iov_len;
    if (total > payload_size_) {
      std::fprintf(stderr,
                   "stripefs-fuse: reply of %zu bytes exceeds the ring payload "
                   "buffer (%zu); answering EIO\n",
                   total, payload_size_);
      error = EIO;
      total = 0;
    } else {
      size_t pos = 0;
      for (const iovec& v : payload) {
        if (v.iov_len == 0) continue;
        if (v.iov_base != payload_ + pos) {
          std::memmove(payload_ + pos, v.iov_base, v.iov_len);
        }
        pos += v.iov_len;
      }
    }
  }
  fuse_out_header oh{};
  oh.len = static_cast<uint32_t>(sizeof(oh) + total);
  oh.error = -error;
  oh.unique = ctx.unique;
  std::memcpy(hdr_->in_out, &oh, sizeof(oh));
  hdr_->ring_ent_in_out.payload_sz = static_cast<uint32_t>(total);

  UringTransport::Queue* q = q_;
  std::lock_guard<std::mutex> lock(q->mu);
  if (tls_submitter != q->t) {
    // The kernel ties a COMMIT_AND_FETCH to the submitting thread: the next
    // request is delivered in its task context, and when that thread exits
    // the entry is cancelled for good. So a thread that may exit before
    // the transport (a file system's own helper) only hands the entry over.
    q->to_commit.push_back(this);
    if (q->to_commit.size() == 1) {
      uint64_t one = 1;
      [[maybe_unused]] ssize_t r = ::write(q->wake_fd, &one, sizeof(one));
    }
    return;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&q->ring);
  if (!sqe) {
    q->SubmitLocked();
    sqe = io_uring_get_sqe(&q->ring);
  }
  if (!sqe) {
    std::fprintf(stderr, "stripefs-fuse: uring q%d has no free SQE\n", q->qid);
    q->busy.fetch_sub(1);
    return;
  }
  PrepCommit(sqe, static_cast<uint16_t>(q->qid));
  q->busy.fetch_sub(1);
  if (!q->on_queue_thread()) q->SubmitLocked();
}

void UringEntry::GiveBack() {
  if (!q_->read_workers || ctx.retried) {
    InFlight::GiveBack();  // not tried by this transport: a bug, EIO
    return;
  }
  q_->HandOverTried(this);
}

void UringTransport::Queue::HandOverTried(UringEntry* e) {
  t->read_would_block_.fetch_add(1, std::memory_order_relaxed);
  e->ctx.must_not_block = false;
  e->ctx.retried = true;
  read_workers->Push({this, e, e->h_, e->fixed_, e->psz_});
}

void UringTransport::ReadWorkers::Run() {
  for (;;) {
    Job j;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return done_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // done_ and nothing left
      j = jobs_.front();
      jobs_.pop_front();
    }
    j.q->Serve(j.e, j.h, j.fixed, j.payload);
  }
}

void UringTransport::Queue::Serve(UringEntry* e, const fuse_in_header& h,
                                  size_t fixed, size_t payload) {
  sink->Dispatch(e, h, std::span<const uint8_t>(e->hdr_->op_in, fixed),
                 std::span<const uint8_t>(e->payload_, payload));
}

void UringTransport::Queue::PrepWakePollLocked() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (!sqe) {
    SubmitLocked();
    sqe = io_uring_get_sqe(&ring);
  }
  if (!sqe) {
    std::fprintf(stderr, "stripefs-fuse: uring q%d has no SQE for wake poll\n",
                 qid);
    return;
  }
  io_uring_prep_poll_add(sqe, wake_fd, POLLIN);
  io_uring_sqe_set_data64(sqe, kWakeTag);
}

void UringTransport::Queue::CommitHandedOverLocked() {
  for (UringEntry* e : to_commit) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (!sqe) {
      SubmitLocked();
      sqe = io_uring_get_sqe(&ring);
    }
    if (!sqe) {
      std::fprintf(stderr, "stripefs-fuse: uring q%d has no free SQE\n", qid);
    } else {
      e->PrepCommit(sqe, static_cast<uint16_t>(qid));
    }
    busy.fetch_sub(1);
  }
  to_commit.clear();
}

Status UringTransport::Queue::Setup() {
  if (pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(qid, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr,
                   "stripefs-fuse: cannot pin uring q%d to CPU %d: %s\n", qid,
                   qid, std::strerror(errno));
    }
  }
  // SQEs: one command per entry plus the stop and wake polls.
  const unsigned sq = static_cast<unsigned>(depth + 3);
  io_uring_params p{};
  p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
  p.cq_entries = sq * 2;
  int r = io_uring_queue_init_params(sq, &ring, &p);
  if (r < 0) {
    return Status::FromErrno(
        -r, "io_uring_queue_init (SQE128) for queue " + std::to_string(qid));
  }
  ring_ok = true;
  for (int i = 0; i < depth; ++i) {
    auto e = std::make_unique<UringEntry>(this, payload_size);
    if (!e->ok())
      return Status::NoSpace("ring entry buffers for queue " +
                             std::to_string(qid));
    entries.push_back(std::move(e));
  }
  std::lock_guard<std::mutex> lock(mu);
  for (auto& e : entries) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    e->PrepRegister(sqe, static_cast<uint16_t>(qid));
  }
  for (int fd : {session_stop_fd, own_stop_fd}) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_poll_add(sqe, fd, POLLIN);
    io_uring_sqe_set_data64(sqe, kStopTag);
  }
  PrepWakePollLocked();
  r = io_uring_submit(&ring);
  if (r < 0) {
    return Status::FromErrno(
        -r, "submitting REGISTER for queue " + std::to_string(qid));
  }
  return Status::Ok();
}

void UringTransport::Queue::Run() {
  tid = pthread_self();
  tls_submitter = t;
  Status st = Setup();
  {
    std::lock_guard<std::mutex> lock(start_mu);
    started = true;
    start_status = st;
  }
  start_cv.notify_all();
  if (!st.ok()) return;
  Loop();
}

void UringTransport::Queue::Loop() {
  bool stopping = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      CommitHandedOverLocked();
      SubmitLocked();
    }
    if (stopping && busy.load() == 0) break;
    if (dead >= depth && busy.load() == 0) break;
    io_uring_cqe* cqe = nullptr;
    int r;
    if (stopping || dead >= depth) {
      __kernel_timespec ts{0, 50 * 1000 * 1000};
      r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
      if (r == -ETIME) continue;
    } else {
      r = io_uring_wait_cqe(&ring, &cqe);
    }
    if (r == -EINTR) continue;
    if (r < 0) {
      std::fprintf(stderr, "stripefs-fuse: uring q%d wait failed: %s\n", qid,
                   std::strerror(-r));
      break;
    }
    unsigned head;
    unsigned seen = 0;
    const unsigned ready = io_uring_cq_ready(&ring);
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      if (io_uring_cqe_get_data64(cqe) == kStopTag) {
        stopping = true;
        continue;
      }
      if (io_uring_cqe_get_data64(cqe) == kWakeTag) {
        uint64_t n;
        [[maybe_unused]] ssize_t rd = ::read(wake_fd, &n, sizeof(n));
        std::lock_guard<std::mutex> lock(mu);
        PrepWakePollLocked();  // handed-over entries commit at the loop top
        continue;
      }
      auto* e = static_cast<UringEntry*>(io_uring_cqe_get_data(cqe));
      if (cqe->res < 0) {
        int err = -cqe->res;
        if (err != ENOTCONN && err != ECANCELED && err != ENODEV) {
          std::fprintf(stderr, "stripefs-fuse: uring q%d entry failed: %s\n",
                       qid, std::strerror(err));
        }
        ++dead;
        continue;
      }
      // A request arrived in entry e.
      fuse_in_header h;
      std::memcpy(&h, e->hdr_->in_out, sizeof(h));
      const fuse_uring_ent_in_out& io = e->hdr_->ring_ent_in_out;
      e->commit_id_ = io.commit_id;
      e->ctx = RequestContext{};
      e->interrupted.store(false);
      e->ctx.queue = qid;
      e->ctx.uring = true;
      e->ctx.cpu = sched_getcpu();
      busy.fetch_add(1);
      size_t psz = io.payload_sz;
      auto fixed = FixedArgSize(h.opcode, parse);
      size_t f = fixed ? *fixed : 0;
      if (f > FUSE_URING_OP_IN_OUT_SZ || psz > e->payload_size_) {
        // Parser reports it: hand over an impossible split.
        f = std::min<size_t>(f, FUSE_URING_OP_IN_OUT_SZ);
        psz = std::min(psz, e->payload_size_);
      }
      e->payload_in_use_ = psz != 0;
      // READs may wait on disks or servers: workers serve them so one queue
      // keeps several in flight; the rest is answered right here. A READ
      // that arrives alone on an otherwise idle queue is served here too:
      // at QD1 the hand-over's wake-up costs more CPU than the read itself.
      const bool lone =
          t->opts_.inline_lone_reads && ready == 1 && busy.load() == 1;
      if (read_workers && h.opcode == FUSE_READ && !lone &&
          t->opts_.try_reads) {
        // Tried here first: served from memory, or given back (GiveBack
        // hands it to the workers).
        t->read_tries_.fetch_add(1, std::memory_order_relaxed);
        e->h_ = h;
        e->fixed_ = f;
        e->psz_ = psz;
        e->ctx.must_not_block = true;
        Serve(e, h, f, psz);
      } else if (read_workers && h.opcode == FUSE_READ && !lone) {
        t->reads_handed_.fetch_add(1, std::memory_order_relaxed);
        read_workers->Push({this, e, h, f, psz});
      } else {
        if (h.opcode == FUSE_READ) {
          t->reads_inline_.fetch_add(1, std::memory_order_relaxed);
        }
        Serve(e, h, f, psz);
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}

UringTransport::UringTransport(int fuse_fd, int stop_fd,
                               UringTransportOptions opts)
    : fd_(fuse_fd), stop_fd_(stop_fd), opts_(opts) {
  if (opts_.queues <= 0) opts_.queues = PossibleCpuCount();
  if (opts_.depth <= 0) opts_.depth = 8;
  opts_.payload_size = std::max<size_t>(opts_.payload_size, kMinReadBuffer);
}

UringTransport::~UringTransport() {
  Stop();
  Join();
}

Status UringTransport::Start(RequestSink* sink) {
  for (int i = 0; i < opts_.queues; ++i) {
    auto q = std::make_unique<Queue>();
    q->t = this;
    q->sink = sink;
    q->qid = i;
    q->fuse_fd = fd_;
    q->session_stop_fd = stop_fd_;
    q->own_stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (q->own_stop_fd < 0) return Status::FromErrno(errno, "eventfd");
    q->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (q->wake_fd < 0) return Status::FromErrno(errno, "eventfd");
    q->payload_size = opts_.payload_size;
    q->parse = opts_.parse;
    q->depth = opts_.depth;
    q->pin = opts_.pin_threads;
    queues_.push_back(std::move(q));
  }
  if (opts_.read_workers > 0) {
    read_workers_ = std::make_unique<ReadWorkers>(this, opts_.read_workers);
    for (auto& q : queues_) q->read_workers = read_workers_.get();
  }
  for (auto& q : queues_) {
    Queue* qp = q.get();
    q->thread = std::thread([qp] { qp->Run(); });
  }
  Status first_error;
  for (auto& q : queues_) {
    std::unique_lock<std::mutex> lock(q->start_mu);
    q->start_cv.wait(lock, [&] { return q->started; });
    if (!q->start_status.ok() && first_error.ok())
      first_error = q->start_status;
  }
  if (!first_error.ok()) {
    Stop();
    Join();
    return first_error;
  }
  return Status::Ok();
}

void UringTransport::Stop() {
  uint64_t one = 1;
  for (auto& q : queues_) {
    if (q->own_stop_fd >= 0) {
      [[maybe_unused]] ssize_t r = ::write(q->own_stop_fd, &one, sizeof(one));
    }
  }
}

void UringTransport::Join() {
  for (auto& q : queues_) {
    if (q->thread.joinable()) q->thread.join();
  }
  // Queue threads leave only once no entry is held, so no READ is queued
  // or running any more.
  read_workers_.reset();
  for (auto& q : queues_) {
    if (q->ring_ok) {
      io_uring_queue_exit(&q->ring);
      q->ring_ok = false;
    }
    for (int* fd : {&q->own_stop_fd, &q->wake_fd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }
  queues_.clear();
}

}  // namespace stripefs::fuse

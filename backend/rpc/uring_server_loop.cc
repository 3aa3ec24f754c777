#include "backend/rpc/uring_server_loop.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <future>
#include <list>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "backend/rpc/frame_assembler.h"
#include "backend/rpc/handshake.h"
#include "backend/rpc/outbound_message.h"
#include "backend/rpc/tcp_socket.h"
#include "backend/rpc/wire_messages.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {
namespace {

constexpr unsigned kRingEntries = 256;
// Frames read ahead (complete, not yet handled) per connection.
constexpr size_t kMaxReadAhead = 4;
// Replies waiting to be sent per connection before we stop handling and
// receiving more of its requests (a client that never reads stalls itself).
constexpr size_t kMaxQueuedReplies = 2;
// A reply not accepted by the socket within this time drops the connection
// (the poll loop used the same 60 s write deadline).
__kernel_timespec send_timeout{60, 0};
// Pause before re-arming accept after EMFILE/ENFILE.
__kernel_timespec accept_retry{0, 100 * 1000 * 1000};

// user_data: a Conn pointer (aligned to 16) or null, plus the operation in
// the low bits.
enum Op : uint64_t {
  kAccept = 1,
  kAcceptRetry = 2,
  kWake = 3,
  kRecv = 4,
  kSend = 5,
  kIgnore = 6,  // link timeouts, cancel requests
  kTick = 7,    // periodic check of connection timeouts
};
constexpr uint64_t kOpMask = 7;

struct Conn {
  UniqueFd fd;
  std::string peer;  // immutable after accept; read by workers
  std::string ip;
  // Until the handshake is done: a fixed-size state, nothing else.
  ServerHandshake hs;
  bool pending = true;    // counted as pending in the limits
  bool detached = false;  // already taken out of the limits
  std::list<Conn*>::iterator pending_pos;
  // After it: the session (used only by the worker holding this
  // connection's request) and the frame assembler.
  std::unique_ptr<Session> session;
  Caller caller;  // the identity it proved; read by workers
  std::unique_ptr<FrameAssembler> in;
  Clock::time_point accepted, last_active, header_started;
  std::deque<RawFrame> ready;  // complete frames, in order, not yet handled
  Status frame_error;          // stream error after `ready`: reject + close
  std::deque<std::unique_ptr<OutboundMessage>> out;  // replies in request order
  bool recv_armed = false;
  bool send_armed = false;
  bool in_worker = false;    // one request of this connection is handled
  bool read_closed = false;  // EOF or error: receive nothing more
  bool closing = false;      // drop: close once no operation is in flight
  bool shut = false;
  std::atomic<bool> dead{false};  // workers skip queued requests
};

struct Job {
  Conn* conn;
  RawFrame frame;
  // Set when the ring thread has already checked the tag (a small frame it
  // verified to ask the handler whether it may run inline).
  std::optional<Frame> verified;
};
struct Done {
  Conn* conn;
  std::unique_ptr<OutboundMessage>
      msg;             // reply or reject frame to send, if any
  bool close = false;  // answer nothing more on this connection
  // The request's bulk buffer, handed back to the connection's assembler
  // for its next frame (FrameAssembler::Recycle).
  AlignedBytes spare_bulk;
};

uint64_t UserData(Conn* c, Op op) { return reinterpret_cast<uint64_t>(c) | op; }

}  // namespace

struct UringServerLoop::Impl {
  Impl(ServerCore* c, int l) : core(c), listen_fd(l) {}

  ServerCore* const core;
  const int listen_fd;
  io_uring ring{};
  UniqueFd wake_fd;  // eventfd: workers and Stop() wake the ring thread
  uint64_t wake_buf = 0;
  std::thread ring_thread;
  std::atomic<bool> stopping{false};

  // Worker pool.
  std::vector<std::thread> workers;
  Mutex job_mu;
  std::condition_variable job_cv;
  std::deque<Job> jobs STRIPEFS_GUARDED_BY(job_mu);
  bool workers_stop STRIPEFS_GUARDED_BY(job_mu) = false;
  Mutex done_mu;
  std::vector<Done> done STRIPEFS_GUARDED_BY(done_mu);

  // Ring-thread state.
  std::unordered_set<Conn*> conns;
  ConnectionLimits limits{core->options};
  std::list<Conn*> pending_conns;  // handshake not done, oldest first
  __kernel_timespec tick{};
  bool tick_armed = false;
  bool multishot = true;
  bool accepted_any = false;
  bool accept_armed = false;
  bool accept_retry_armed = false;
  bool stop_seen = false;
  bool logged_ring_error = false;

  int InitRing();
  void RingMain(std::promise<int>* ready);
  io_uring_sqe* Sqe();
  void ArmAccept();
  void ArmWake();
  void ArmRecv(Conn* c);
  void ArmSend(Conn* c);
  void Cancel(uint64_t tag);
  void OnCqe(const io_uring_cqe* cqe);
  void OnAccept(int res, unsigned flags);
  void OnRecv(Conn* c, int res);
  void OnSend(Conn* c, int res);
  void OnWake();
  void OnTick();
  void ArmTick();
  // Makes room for a connection from `ip` (evicting pending ones); false
  // when it must be refused.
  bool Admit(const std::string& ip, const std::string& peer);
  void Detach(Conn* c);
  void OnHandshakeBytes(Conn* c, size_t n);
  void Pump(Conn* c);
  // Takes the next ready frame of `c` (no request of it with a worker):
  // handles it on this thread if it is small and the handler says it is
  // inline-safe (true), else hands it to the worker pool (false).
  bool HandleNext(Conn* c);
  // A finished request (worker or inline) back on the ring thread; the
  // caller pumps the connection.
  void Finish(Done& d);
  void BeginStop();

  void WorkerMain();
  Done RunJob(Job& job);
  Done AnswerFrame(Conn* c, Frame& f);
  // A frame whose tag did not verify: counted, logged, reject + close.
  Done RejectDone(Conn* c, const Status& why);
  void Wake();
};

int UringServerLoop::Impl::InitRing() {
  io_uring_params p{};
  unsigned cq = static_cast<unsigned>(
      std::clamp<size_t>(core->options.max_connections * 4 + 256, 4096, 65536));
  // The ring is used by this thread only: let the kernel skip the
  // cross-thread work (SINGLE_ISSUER + DEFER_TASKRUN, 6.1+).
  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER |
            IORING_SETUP_DEFER_TASKRUN;
  p.cq_entries = cq;
  int rc = io_uring_queue_init_params(kRingEntries, &ring, &p);
  if (rc == -EINVAL) {
    p = io_uring_params{};
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = cq;
    rc = io_uring_queue_init_params(kRingEntries, &ring, &p);
  }
  return rc;
}

io_uring_sqe* UringServerLoop::Impl::Sqe() {
  io_uring_sqe* s = io_uring_get_sqe(&ring);
  while (s == nullptr) {
    io_uring_submit(&ring);
    s = io_uring_get_sqe(&ring);
  }
  return s;
}

void UringServerLoop::Impl::ArmAccept() {
  io_uring_sqe* s = Sqe();
  if (multishot) {
    io_uring_prep_multishot_accept(s, listen_fd, nullptr, nullptr,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC);
  } else {
    io_uring_prep_accept(s, listen_fd, nullptr, nullptr,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
  }
  io_uring_sqe_set_data64(s, UserData(nullptr, kAccept));
  accept_armed = true;
}

void UringServerLoop::Impl::ArmWake() {
  io_uring_sqe* s = Sqe();
  io_uring_prep_read(s, wake_fd.get(), &wake_buf, sizeof(wake_buf), 0);
  io_uring_sqe_set_data64(s, UserData(nullptr, kWake));
}

void UringServerLoop::Impl::ArmRecv(Conn* c) {
  bool exact = false;
  std::span<uint8_t> buf =
      c->in ? c->in->RecvBuffer(&exact) : c->hs.RecvBuffer();
  io_uring_sqe* s = Sqe();
  io_uring_prep_recv(s, c->fd.get(), buf.data(), buf.size(),
                     exact ? MSG_WAITALL : 0);
  io_uring_sqe_set_data64(s, UserData(c, kRecv));
  c->recv_armed = true;
}

void UringServerLoop::Impl::ArmSend(Conn* c) {
  msghdr* unsent = c->out.front()->Unsent();
  // The send and its linked timeout must go to the kernel together.
  if (io_uring_sq_space_left(&ring) < 2) io_uring_submit(&ring);
  io_uring_sqe* s = Sqe();
  io_uring_prep_sendmsg(s, c->fd.get(), unsent, MSG_NOSIGNAL);
  io_uring_sqe_set_data64(s, UserData(c, kSend));
  s->flags |= IOSQE_IO_LINK;
  io_uring_sqe* t = Sqe();
  io_uring_prep_link_timeout(t, &send_timeout, 0);
  io_uring_sqe_set_data64(t, UserData(nullptr, kIgnore));
  c->send_armed = true;
}

void UringServerLoop::Impl::Cancel(uint64_t tag) {
  io_uring_sqe* s = Sqe();
  io_uring_prep_cancel64(s, tag, 0);
  io_uring_sqe_set_data64(s, UserData(nullptr, kIgnore));
}

void UringServerLoop::Impl::RingMain(std::promise<int>* ready) {
  int rc = InitRing();
  ready->set_value(rc);
  if (rc < 0) return;
  ArmAccept();
  ArmWake();
  ArmTick();
  for (;;) {
    rc = io_uring_submit_and_wait(&ring, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY &&
        rc != -ETIME) {
      if (!logged_ring_error) {
        std::fprintf(stderr, "%s: io_uring_enter failed: %s (retrying)\n",
                     core->options.log_name.c_str(), std::strerror(-rc));
        logged_ring_error = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    unsigned head;
    unsigned n = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) {
      OnCqe(cqe);
      ++n;
    }
    io_uring_cq_advance(&ring, n);
    if (stopping.load() && !stop_seen) BeginStop();
    if (stop_seen && conns.empty() && !accept_armed && !accept_retry_armed &&
        !tick_armed)
      break;
  }
  // Cancels what is still pending (the eventfd read) and frees the ring.
  io_uring_queue_exit(&ring);
}

void UringServerLoop::Impl::OnCqe(const io_uring_cqe* cqe) {
  uint64_t tag = io_uring_cqe_get_data64(cqe);
  Conn* c = reinterpret_cast<Conn*>(tag & ~kOpMask);
  switch (static_cast<Op>(tag & kOpMask)) {
    case kAccept:
      OnAccept(cqe->res, cqe->flags);
      break;
    case kAcceptRetry:
      accept_retry_armed = false;
      if (!stop_seen && !accept_armed) ArmAccept();
      break;
    case kWake:
      OnWake();
      break;
    case kRecv:
      OnRecv(c, cqe->res);
      break;
    case kSend:
      OnSend(c, cqe->res);
      break;
    case kTick:
      tick_armed = false;
      if (!stop_seen) OnTick();
      break;
    case kIgnore:
      break;
  }
}

void UringServerLoop::Impl::ArmTick() {
  const RpcServerOptions& o = core->options;
  auto shortest =
      std::min({o.handshake_timeout, o.header_timeout, o.idle_timeout});
  auto step = std::clamp<std::chrono::milliseconds>(
      shortest / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
  tick.tv_sec = step.count() / 1000;
  tick.tv_nsec = (step.count() % 1000) * 1000000;
  io_uring_sqe* s = Sqe();
  io_uring_prep_timeout(s, &tick, 0, 0);
  io_uring_sqe_set_data64(s, UserData(nullptr, kTick));
  tick_armed = true;
}

void UringServerLoop::Impl::OnTick() {
  const RpcServerOptions& o = core->options;
  auto now = Clock::now();
  std::vector<Conn*> expired;
  for (Conn* c : conns) {
    if (c->closing) continue;
    if (!c->session) {
      if (now - c->accepted >= o.handshake_timeout) {
        core->LogTimeout(c->peer,
                         "no handshake within the handshake timeout "
                         "(RpcServerOptions::handshake_timeout)");
        expired.push_back(c);
      }
      continue;
    }
    bool busy = c->in_worker || c->send_armed || !c->out.empty() ||
                !c->ready.empty() || !c->frame_error.ok();
    if (busy) continue;
    if (c->in->mid_header() && now - c->header_started >= o.header_timeout) {
      core->LogTimeout(c->peer,
                       "frame header not complete within the header "
                       "timeout (RpcServerOptions::header_timeout)");
      expired.push_back(c);
    } else if (now - c->last_active >= o.idle_timeout) {
      ++core->n_timed_out;  // normal for pooled client connections: no log
      expired.push_back(c);
    }
  }
  for (Conn* c : expired) {
    c->closing = true;
    Pump(c);
  }
  ArmTick();
}

void UringServerLoop::Impl::Detach(Conn* c) {
  if (c->detached) return;
  c->detached = true;
  limits.Closed(c->ip, c->pending);
  if (c->pending) {
    pending_conns.erase(c->pending_pos);
    --core->n_pending;
  }
}

bool UringServerLoop::Impl::Admit(const std::string& ip,
                                  const std::string& peer) {
  for (;;) {
    ConnectionLimits::Verdict v = limits.Check(ip);
    if (v == ConnectionLimits::Verdict::kAdmit) return true;
    Conn* victim = nullptr;
    if (v == ConnectionLimits::Verdict::kEvictPendingAny &&
        !pending_conns.empty()) {
      victim = pending_conns.front();
    } else if (v == ConnectionLimits::Verdict::kEvictPendingSameIp) {
      for (Conn* p : pending_conns) {
        if (p->ip == ip) {
          victim = p;
          break;
        }
      }
    }
    if (victim == nullptr) {
      core->LogRefused(peer, limits.Describe(ip));
      return false;
    }
    core->LogRefused(victim->peer,
                     "dropping the oldest unauthenticated connection for a "
                     "new one (" +
                         std::to_string(limits.pending()) +
                         " handshakes pending: RpcServerOptions::max_pending"
                         "[_per_ip])");
    Detach(victim);
    victim->closing = true;
    Pump(victim);
  }
}

void UringServerLoop::Impl::OnAccept(int res, unsigned flags) {
  if (!(flags & IORING_CQE_F_MORE)) accept_armed = false;
  if (res >= 0) {
    accepted_any = true;
    UniqueFd fd(res);
    std::string peer = PeerAddress(fd.get());
    if (stop_seen) return;
    std::string ip = IpOf(peer);
    if (!Admit(ip, peer)) {
      if (!accept_armed && !accept_retry_armed) ArmAccept();
      return;  // fd closes here
    }
    ++core->n_connections;
    ++core->n_open;
    ++core->n_pending;
    auto* c = new Conn;
    c->fd = std::move(fd);
    c->peer = std::move(peer);
    c->ip = std::move(ip);
    c->accepted = Clock::now();
    limits.Opened(c->ip);
    c->pending_pos = pending_conns.insert(pending_conns.end(), c);
    conns.insert(c);
    Pump(c);
  } else if (res == -EINVAL && multishot && !accepted_any) {
    multishot = false;  // kernel without multishot accept: re-arm each time
  } else if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS ||
             res == -ENOMEM) {
    core->Log(std::string("accept: ") + std::strerror(-res) +
              " (out of file descriptors?)");
    if (!accept_armed && !stop_seen && !accept_retry_armed) {
      io_uring_sqe* s = Sqe();
      io_uring_prep_timeout(s, &accept_retry, 0, 0);
      io_uring_sqe_set_data64(s, UserData(nullptr, kAcceptRetry));
      accept_retry_armed = true;
    }
    return;
  }
  // Other errors (ECONNABORTED, EINTR ...) are per connection: keep going.
  if (!accept_armed && !stop_seen && !accept_retry_armed) ArmAccept();
}

void UringServerLoop::Impl::OnRecv(Conn* c, int res) {
  c->recv_armed = false;
  if (c->closing) {
    Pump(c);
    return;
  }
  if (res > 0 && !c->in) {
    OnHandshakeBytes(c, static_cast<size_t>(res));
  } else if (res > 0) {
    std::vector<RawFrame> frames;
    bool was_mid_header = c->in->mid_header();
    Status s = c->in->Commit(static_cast<size_t>(res), &frames);
    for (auto& f : frames) c->ready.push_back(std::move(f));
    c->last_active = Clock::now();
    if (!was_mid_header || !frames.empty()) c->header_started = c->last_active;
    if (!s.ok()) {
      c->read_closed = true;
      core->CountReject(s, c->peer);
      c->frame_error = s;  // reject frame after the replies already due
    }
  } else if (res == 0) {
    c->read_closed = true;
    if (c->in ? c->in->mid_frame() : c->hs.started()) {
      core->CountReject(
          Status(ECONNRESET,
                 c->in ? "connection closed mid-frame (truncated frame)"
                       : "connection closed during the handshake (a client "
                         "that refused our proof: another cluster key, or "
                         "it expected another server)"),
          c->peer);
    }
  } else if (res != -EINTR && res != -EAGAIN) {
    c->closing = true;  // ECONNRESET, ECANCELED ...
  }
  Pump(c);
}

void UringServerLoop::Impl::OnHandshakeBytes(Conn* c, size_t n) {
  bool had_hello = c->hs.hello_ready();
  Status s = c->hs.Commit(n, core->auth());
  if (!s.ok()) {
    c->read_closed = true;
    core->CountReject(s, c->peer);
    c->frame_error = s;
    return;
  }
  if (!had_hello && c->hs.hello_ready())
    c->out.push_back(OutboundMessage::Raw(c->hs.server_hello()));
  if (!c->hs.done()) return;
  c->session = std::make_unique<Session>(c->hs.TakeSession());
  c->caller = c->hs.caller();
  c->in = std::make_unique<FrameAssembler>();
  c->last_active = Clock::now();
  limits.Authenticated(c->ip);
  core->RegisterSession(c->fd.get(), c->caller);
  pending_conns.erase(c->pending_pos);
  c->pending = false;
  --core->n_pending;
}

void UringServerLoop::Impl::OnSend(Conn* c, int res) {
  c->send_armed = false;
  if (c->closing) {
    Pump(c);
    return;
  }
  if (res == -EINTR || res == -EAGAIN) {
    // Pump sends the rest again.
  } else if (res <= 0) {
    c->closing = true;  // EPIPE, ECONNRESET, ECANCELED (60 s timeout) ...
  } else if (c->out.front()->Advance(static_cast<size_t>(res))) {
    c->out.pop_front();
    c->last_active = Clock::now();
  }
  Pump(c);
}

void UringServerLoop::Impl::OnWake() {
  std::vector<Done> batch;
  {
    MutexLock lock(&done_mu);
    batch.swap(done);
  }
  for (Done& d : batch) {
    d.conn->in_worker = false;
    Finish(d);
    Pump(d.conn);
  }
  ArmWake();  // stays armed until the ring is torn down
}

void UringServerLoop::Impl::Finish(Done& d) {
  Conn* c = d.conn;
  if (d.close) {
    c->read_closed = true;
    c->ready.clear();
    c->frame_error = Status::Ok();
  }
  if (d.msg && !c->closing) c->out.push_back(std::move(d.msg));
  if (c->in && d.spare_bulk.capacity() > 0)
    c->in->Recycle(std::move(d.spare_bulk));
}

bool UringServerLoop::Impl::HandleNext(Conn* c) {
  Job job{c, std::move(c->ready.front()), std::nullopt};
  c->ready.pop_front();
  const FrameHeader& h = job.frame.header;
  if (core->options.inline_requests &&
      size_t{h.payload_len} + h.bulk_len <= kMaxInlineFrameBytes) {
    // Small frame: checking its tag here costs less than a hand-off. The
    // handler is asked only about an authenticated request.
    Result<Frame> f = std::move(job.frame).Verify(c->session->recv);
    bool run_here = !f.ok() || (f->header.flags & kFlagResponse) ||
                    f->header.type == static_cast<uint16_t>(MsgType::kPing) ||
                    core->handler->InlineSafe(f->header.type, f->payload);
    if (run_here) {
      Done d = f.ok() ? AnswerFrame(c, *f) : RejectDone(c, f.status());
      if (f.ok() && !d.close) ++core->n_inline;
      Finish(d);
      return true;
    }
    job.verified = std::move(f).value();
  }
  c->in_worker = true;
  {
    MutexLock lock(&job_mu);
    jobs.push_back(std::move(job));
  }
  job_cv.notify_one();
  return false;
}

// Advances one connection as far as it can go; may delete it.
void UringServerLoop::Impl::Pump(Conn* c) {
  if (stop_seen) c->closing = true;
  if (!c->closing) {
    // Inline requests are answered here, at most kMaxQueuedReplies per call
    // (each adds a reply to `out`, which only a send completion drains), so
    // one busy connection cannot hold the ring thread from the others.
    while (!c->in_worker && !c->ready.empty() &&
           c->out.size() < kMaxQueuedReplies && HandleNext(c)) {
    }
    if (!c->in_worker && c->ready.empty() &&
        c->out.size() < kMaxQueuedReplies && !c->frame_error.ok()) {
      FrameError e = FrameErrorOf(c->frame_error);
      c->frame_error = Status::Ok();
      if (e != FrameError::kTruncated)
        c->out.push_back(OutboundMessage::Reject(e));
    }
    if (!c->send_armed && !c->out.empty()) ArmSend(c);
    if (!c->read_closed && !c->recv_armed && c->ready.size() < kMaxReadAhead &&
        c->out.size() < kMaxQueuedReplies) {
      ArmRecv(c);
    }
    if (c->read_closed && !c->in_worker && c->ready.empty() &&
        c->frame_error.ok() && c->out.empty() && !c->send_armed) {
      c->closing = true;  // everything answered
    }
  }
  if (!c->closing) return;
  c->dead = true;
  if ((c->recv_armed || c->send_armed) && !c->shut) {
    c->shut = true;
    // Wakes the armed recv/send (they complete with 0 / EPIPE). No
    // ASYNC_CANCEL by user_data here: a freed Conn's address may be reused
    // by the next connection, and a late cancel would hit its operation.
    ::shutdown(c->fd.get(), SHUT_RDWR);
  }
  if (c->recv_armed || c->send_armed || c->in_worker) return;
  ::shutdown(c->fd.get(), SHUT_RDWR);
  if (c->session) core->UnregisterSession(c->fd.get());
  Detach(c);
  conns.erase(c);
  delete c;  // closes the fd
  --core->n_open;
}

void UringServerLoop::Impl::BeginStop() {
  stop_seen = true;
  if (accept_armed) Cancel(UserData(nullptr, kAccept));
  if (tick_armed) Cancel(UserData(nullptr, kTick));
  std::vector<Conn*> all(conns.begin(), conns.end());
  for (Conn* c : all) Pump(c);
}

void UringServerLoop::Impl::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd.get(), &one, sizeof(one));
}

void UringServerLoop::Impl::WorkerMain() {
  for (;;) {
    Job job;
    {
      UniqueMutexLock lock(&job_mu);
      job_cv.wait(lock.native(), [&] {
        job_mu.AssertHeld();
        return workers_stop || !jobs.empty();
      });
      if (jobs.empty()) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    Done d = RunJob(job);
    bool was_empty;
    {
      MutexLock lock(&done_mu);
      was_empty = done.empty();
      done.push_back(std::move(d));
    }
    if (was_empty) Wake();
  }
}

Done UringServerLoop::Impl::RunJob(Job& job) {
  Conn* c = job.conn;
  if (c->dead.load()) {  // connection dropped (or Stop) before we started
    return Done{c, nullptr, true, {}};
  }
  if (job.verified) return AnswerFrame(c, *job.verified);
  Result<Frame> f = std::move(job.frame).Verify(c->session->recv);
  if (!f.ok()) return RejectDone(c, f.status());
  return AnswerFrame(c, *f);
}

Done UringServerLoop::Impl::RejectDone(Conn* c, const Status& why) {
  core->CountReject(why, c->peer);
  return Done{c, OutboundMessage::Reject(FrameErrorOf(why)), true, {}};
}

// Runs the handler for one verified frame and seals its reply (worker or
// ring thread).
Done UringServerLoop::Impl::AnswerFrame(Conn* c, Frame& frame) {
  Done d{c, nullptr, false, {}};
  Frame* f = &frame;
  auto m = std::make_unique<OutboundMessage>();
  FrameHeader rh;
  bool answer = false;
  try {
    answer = core->Answer(*f, c->peer, c->caller, &rh, &m->reply);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: handler for request type %u from %s threw: %s\n",
                 core->options.log_name.c_str(), unsigned{f->header.type},
                 c->peer.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: handler for request type %u from %s threw\n",
                 core->options.log_name.c_str(), unsigned{f->header.type},
                 c->peer.c_str());
  }
  if (!answer) {
    d.close = true;
    return d;
  }
  if (m->reply.payload.size() > kMaxPayload ||
      m->reply.bulk.size() > kMaxBulk) {
    std::fprintf(stderr,
                 "%s: reply to request type %u from %s too large for one "
                 "frame (payload %zu, bulk %zu bytes); closing connection\n",
                 core->options.log_name.c_str(), unsigned{f->header.type},
                 c->peer.c_str(), m->reply.payload.size(),
                 m->reply.bulk.size());
    d.close = true;
    return d;
  }
  m->seal = SealFrame(c->session->send, rh, m->reply.payload, m->reply.bulk,
                      &m->ciphertext);
  m->BuildIov();
  // The request's bulk (unless the handler moved it away, or the reply
  // points into it) goes back to the assembler for the next frame.
  const auto rb = reinterpret_cast<uintptr_t>(m->reply.bulk.data());
  const auto qb = reinterpret_cast<uintptr_t>(f->bulk.data());
  const bool reply_uses_it =
      !m->reply.bulk.empty() && rb >= qb && rb < qb + f->bulk.capacity();
  if (f->bulk.capacity() > 0 && !reply_uses_it)
    d.spare_bulk = std::move(f->bulk);
  d.msg = std::move(m);
  return d;
}

UringServerLoop::UringServerLoop(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

Result<std::unique_ptr<UringServerLoop>> UringServerLoop::Start(
    ServerCore* core, int listen_fd) {
  auto impl = std::make_unique<Impl>(core, listen_fd);
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return Status::FromErrno(errno, "eventfd");
  impl->wake_fd.Reset(efd);
  size_t n_workers = std::max<size_t>(1, core->options.worker_threads);
  for (size_t i = 0; i < n_workers; ++i)
    impl->workers.emplace_back([p = impl.get()] { p->WorkerMain(); });
  std::promise<int> ready;
  std::future<int> rc = ready.get_future();
  impl->ring_thread =
      std::thread([p = impl.get(), &ready] { p->RingMain(&ready); });
  int r = rc.get();
  std::unique_ptr<UringServerLoop> loop(new UringServerLoop(std::move(impl)));
  if (r < 0) {
    loop->Stop();
    return Status(-r, std::string("io_uring_queue_init: ") + std::strerror(-r));
  }
  return loop;
}

UringServerLoop::~UringServerLoop() { Stop(); }

void UringServerLoop::Stop() {
  Impl& i = *impl_;
  if (i.ring_thread.joinable()) {
    i.stopping = true;
    i.Wake();
    i.ring_thread.join();
  }
  {
    MutexLock lock(&i.job_mu);
    i.workers_stop = true;
  }
  i.job_cv.notify_all();
  for (auto& w : i.workers) {
    if (w.joinable()) w.join();
  }
  i.workers.clear();
}

}  // namespace stripefs::rpc

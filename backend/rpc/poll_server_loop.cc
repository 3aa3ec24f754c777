#include "backend/rpc/poll_server_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "backend/rpc/handshake.h"

namespace stripefs::rpc {

Result<std::unique_ptr<PollServerLoop>> PollServerLoop::Start(ServerCore* core,
                                                              int listen_fd) {
  std::unique_ptr<PollServerLoop> l(new PollServerLoop(core, listen_fd));
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::FromErrno(errno, "pipe");
  l->wake_read_.Reset(p[0]);
  l->wake_write_.Reset(p[1]);
  l->accept_thread_ = std::thread([raw = l.get()] { raw->AcceptLoop(); });
  return l;
}

PollServerLoop::~PollServerLoop() { Stop(); }

void PollServerLoop::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  char b = 1;
  if (wake_write_.valid()) (void)!::write(wake_write_.get(), &b, 1);
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    MutexLock lock(&mu_);
    for (auto& c : conns_) ::shutdown(c->fd.get(), SHUT_RDWR);
  }
  Reap(true);
}

void PollServerLoop::Reap(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    MutexLock lock(&mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (all || (*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    if (c->thread.joinable()) c->thread.join();
    c->fd.Reset();
    --core_->n_open;
    MutexLock lock(&mu_);
    if (!c->evicted) limits_.Closed(c->ip, c->pending);
    if (c->pending && !c->evicted) --core_->n_pending;
  }
}

void PollServerLoop::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    int r = ::poll(p, 2, 1000);
    if (stopping_.load()) break;
    Reap(false);
    if (r <= 0 || !(p[0].revents & POLLIN)) continue;
    int fd =
        ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        core_->Log("accept: out of file descriptors");
        ::poll(nullptr, 0, 100);
      }
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd.Reset(fd);
    c->peer = PeerAddress(fd);
    c->ip = IpOf(c->peer);
    c->accepted = Clock::now();
    MutexLock lock(&mu_);
    if (!Admit(c->ip, c->peer)) continue;  // c closes the fd
    limits_.Opened(c->ip);
    ++core_->n_connections;
    ++core_->n_open;
    ++core_->n_pending;
    Connection* raw = c.get();
    conns_.push_back(std::move(c));
    raw->thread = std::thread([this, raw] { Serve(raw); });
  }
}

bool PollServerLoop::Admit(const std::string& ip, const std::string& peer) {
  for (;;) {
    ConnectionLimits::Verdict v = limits_.Check(ip);
    if (v == ConnectionLimits::Verdict::kAdmit) return true;
    Connection* victim = nullptr;
    for (auto& c : conns_) {
      if (c->pending && !c->evicted &&
          (v == ConnectionLimits::Verdict::kEvictPendingAny || c->ip == ip)) {
        victim = c.get();
        break;
      }
    }
    if (v == ConnectionLimits::Verdict::kRefuse || victim == nullptr) {
      core_->LogRefused(peer, limits_.Describe(ip));
      return false;
    }
    core_->LogRefused(victim->peer,
                      "dropping the oldest unauthenticated connection for a "
                      "new one (" +
                          std::to_string(limits_.pending()) +
                          " handshakes pending: RpcServerOptions::max_pending"
                          "[_per_ip])");
    victim->evicted = true;
    limits_.Closed(victim->ip, true);
    --core_->n_pending;
    ::shutdown(victim->fd.get(), SHUT_RDWR);  // its thread ends
  }
}

bool PollServerLoop::Evicted(Connection* c) {
  MutexLock lock(&mu_);
  return c->evicted;  // dropped for a newer connection: already logged
}

void PollServerLoop::Serve(Connection* c) {
  int fd = c->fd.get();
  Caller caller;
  Result<Session> s = RunServerHandshake(
      fd, core_->auth(), c->accepted + core_->options.handshake_timeout,
      &caller);
  if (s.ok()) {
    MutexLock lock(&mu_);
    if (c->evicted) {
      s = Status(ECONNABORTED, "evicted");
    } else {
      limits_.Authenticated(c->ip);
      c->pending = false;
      --core_->n_pending;
      core_->RegisterSession(fd, caller);
    }
  } else if (!stopping_.load() && !Evicted(c)) {
    FrameError e = FrameErrorOf(s.status());
    if (s.status().code() == ETIMEDOUT) {
      core_->LogTimeout(c->peer,
                        "no handshake within the handshake timeout "
                        "(RpcServerOptions::handshake_timeout)");
    } else if (e != FrameError::kNone) {
      core_->CountReject(s.status(), c->peer);
      if (e != FrameError::kTruncated) WriteRejectFrame(fd, e);
    }
  }
  if (s.ok()) ServeFrames(c, &*s, caller);
  core_->UnregisterSession(fd);  // before Reap closes the fd
  ::shutdown(fd, SHUT_RDWR);
  c->done = true;
}

void PollServerLoop::ServeFrames(Connection* c, Session* session,
                                 const Caller& caller) {
  int fd = c->fd.get();
  const RpcServerOptions& o = core_->options;
  while (!stopping_.load()) {
    Result<Frame> f = ReadFrame(
        fd, session->recv, Clock::now() + o.idle_timeout, o.header_timeout);
    if (!f.ok()) {
      Status s = f.status();
      FrameError e = FrameErrorOf(s);
      if (stopping_.load()) break;
      if (s.code() == ETIMEDOUT) {
        if (s.message().find("header") != std::string::npos)
          core_->LogTimeout(c->peer,
                            "frame header not complete within the "
                            "header timeout "
                            "(RpcServerOptions::header_timeout)");
        else
          ++core_->n_timed_out;  // idle: normal for pooled connections
      } else if (e != FrameError::kNone) {
        core_->CountReject(s, c->peer);
        if (e != FrameError::kTruncated) WriteRejectFrame(fd, e);
      }
      break;  // clean close, I/O error, timeout or bad frame: drop it
    }
    FrameHeader rh;
    RpcReply reply;
    if (!core_->Answer(*f, c->peer, caller, &rh, &reply)) break;
    Status ws = WriteFrame(fd, session->send, rh, reply.payload, reply.bulk,
                           Clock::now() + std::chrono::seconds(60));
    if (!ws.ok()) break;
  }
}

}  // namespace stripefs::rpc

#include "backend/rpc/poll_server_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

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
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : conns_) ::shutdown(c->fd.get(), SHUT_RDWR);
  }
  Reap(true);
}

void PollServerLoop::Reap(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
        std::fprintf(stderr, "%s: accept: out of file descriptors\n",
                     core_->options.log_name.c_str());
        ::poll(nullptr, 0, 100);
      }
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd.Reset(fd);
    c->peer = PeerAddress(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (conns_.size() >= core_->options.max_connections) {
      core_->LogRefused(c->peer, conns_.size());
      continue;  // c closes the fd
    }
    ++core_->n_connections;
    ++core_->n_open;
    Connection* raw = c.get();
    conns_.push_back(std::move(c));
    raw->thread = std::thread([this, raw] { Serve(raw); });
  }
}

void PollServerLoop::Serve(Connection* c) {
  int fd = c->fd.get();
  const ClusterKey& key = *core_->key;
  while (!stopping_.load()) {
    Result<Frame> f = ReadFrame(fd, key, NoDeadline());
    if (!f.ok()) {
      Status s = f.status();
      FrameError e = FrameErrorOf(s);
      if (e != FrameError::kNone && !stopping_.load()) {
        core_->CountReject(s, c->peer);
        if (e != FrameError::kTruncated) WriteRejectFrame(fd, e);
      }
      break;  // clean close, I/O error or bad frame: drop the connection
    }
    FrameHeader rh;
    RpcReply reply;
    if (!core_->Answer(*f, c->peer, &rh, &reply)) break;
    Status ws = WriteFrame(fd, key, rh, reply.payload, reply.bulk,
                           Clock::now() + std::chrono::seconds(60));
    if (!ws.ok()) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  c->done = true;
}

}  // namespace stripefs::rpc

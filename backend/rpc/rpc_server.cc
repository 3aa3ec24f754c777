#include "backend/rpc/rpc_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "backend/rpc/wire_messages.h"

namespace stripefs::rpc {

RpcServer::RpcServer(RpcServerOptions options,
                     std::shared_ptr<const ClusterKey> key, RpcHandler* handler)
    : options_(std::move(options)), key_(std::move(key)), handler_(handler) {}

Result<std::unique_ptr<RpcServer>> RpcServer::Start(
    RpcServerOptions options, std::shared_ptr<const ClusterKey> key,
    RpcHandler* handler) {
  if (!key) return Status::InvalidArgument("RpcServer needs a cluster key");
  std::unique_ptr<RpcServer> s(
      new RpcServer(std::move(options), std::move(key), handler));
  STRIPEFS_ASSIGN_OR_RETURN(s->listen_fd_,
                            ListenTcp(s->options_.listen, &s->address_));
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::FromErrno(errno, "pipe");
  s->wake_read_.Reset(p[0]);
  s->wake_write_.Reset(p[1]);
  s->accept_thread_ = std::thread([srv = s.get()] { srv->AcceptLoop(); });
  return s;
}

RpcServer::~RpcServer() { Stop(); }

RpcServerCounters RpcServer::counters() const {
  RpcServerCounters c;
  c.connections = n_connections_.load();
  c.requests = n_requests_.load();
  c.rejected_bad_mac = n_bad_mac_.load();
  c.rejected_bad_crc = n_bad_crc_.load();
  c.rejected_bad_header = n_bad_header_.load();
  c.rejected_oversize = n_oversize_.load();
  c.rejected_truncated = n_truncated_.load();
  return c;
}

void RpcServer::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
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
  listen_fd_.Reset();
}

void RpcServer::Reap(bool all) {
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
  }
}

void RpcServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd_.get(), POLLIN, 0},
                   {wake_read_.get(), POLLIN, 0}};
    int r = ::poll(p, 2, 1000);
    if (stopping_.load()) break;
    Reap(false);
    if (r <= 0 || !(p[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        std::fprintf(stderr, "%s: accept: out of file descriptors\n",
                     options_.log_name.c_str());
        ::poll(nullptr, 0, 100);
      }
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd.Reset(fd);
    c->peer = PeerAddress(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (conns_.size() >= options_.max_connections) {
      std::fprintf(stderr,
                   "%s: refusing connection from %s: %zu connections "
                   "open (limit)\n",
                   options_.log_name.c_str(), c->peer.c_str(), conns_.size());
      continue;  // c closes the fd
    }
    ++n_connections_;
    Connection* raw = c.get();
    conns_.push_back(std::move(c));
    raw->thread = std::thread([this, raw] { Serve(raw); });
  }
}

void RpcServer::CountReject(const Status& s, const std::string& peer) {
  FrameError e = FrameErrorOf(s);
  switch (e) {
    case FrameError::kBadMac:
      ++n_bad_mac_;
      break;
    case FrameError::kBadCrc:
      ++n_bad_crc_;
      break;
    case FrameError::kBadMagic:
    case FrameError::kBadVersion:
      ++n_bad_header_;
      break;
    case FrameError::kOversize:
      ++n_oversize_;
      break;
    case FrameError::kTruncated:
      ++n_truncated_;
      break;
    case FrameError::kNone:
      return;
  }
  if (options_.log_rejects) {
    std::fprintf(stderr, "%s: rejected frame from %s: %s; closing connection\n",
                 options_.log_name.c_str(), peer.c_str(), s.message().c_str());
  }
}

void RpcServer::Serve(Connection* c) {
  int fd = c->fd.get();
  while (!stopping_.load()) {
    Result<Frame> f = ReadFrame(fd, *key_, NoDeadline());
    if (!f.ok()) {
      Status s = f.status();
      FrameError e = FrameErrorOf(s);
      if (e != FrameError::kNone && !stopping_.load()) {
        CountReject(s, c->peer);
        if (e != FrameError::kTruncated) WriteRejectFrame(fd, e);
      }
      break;  // clean close, I/O error or bad frame: drop the connection
    }
    const FrameHeader& h = f->header;
    if (h.flags & kFlagResponse) {
      CountReject(Status(EPROTO, "response frame sent to a server"), c->peer);
      break;
    }
    ++n_requests_;
    RpcReply reply;
    if (h.type == static_cast<uint16_t>(MsgType::kPing)) {
      Msg<MsgType::kPing>::Request req;
      Status st = DecodeRequest<MsgType::kPing>(f->payload, &req)
                      ? Status::Ok()
                      : Status(EPROTO, "malformed Ping");
      reply.payload = EncodeResponse<MsgType::kPing>(
          st, {handler_->Role(), uint32_t{kProtocolVersion}});
    } else {
      handler_->Handle(h.type, f->payload, f->bulk, &reply);
    }
    FrameHeader rh;
    rh.flags = kFlagResponse;
    rh.type = h.type;
    rh.request_id = h.request_id;
    Status ws = WriteFrame(fd, *key_, rh, reply.payload, reply.bulk,
                           Clock::now() + std::chrono::seconds(60));
    if (!ws.ok()) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  c->done = true;
}

}  // namespace stripefs::rpc

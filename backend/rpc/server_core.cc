#include "backend/rpc/server_core.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstdio>

#include "backend/rpc/typed_call.h"
#include "backend/rpc/wire_messages.h"

namespace stripefs::rpc {

RpcServerCounters ServerCore::Counters() const {
  RpcServerCounters c;
  c.connections = n_connections.load();
  c.open_connections = n_open.load();
  c.requests = n_requests.load();
  c.inline_requests = n_inline.load();
  c.rejected_bad_mac = n_bad_mac.load();
  c.rejected_bad_handshake = n_bad_handshake.load();
  c.rejected_bad_header = n_bad_header.load();
  c.rejected_oversize = n_oversize.load();
  c.rejected_truncated = n_truncated.load();
  c.pending_connections = n_pending.load();
  c.refused_connections = n_refused.load();
  c.timed_out_connections = n_timed_out.load();
  return c;
}

void ServerCore::CountReject(const Status& s, const std::string& peer) {
  switch (FrameErrorOf(s)) {
    case FrameError::kBadMac:
    case FrameError::kCleartext:
      ++n_bad_mac;
      break;
    case FrameError::kBadHandshake:
      ++n_bad_handshake;
      break;
    case FrameError::kBadMagic:
    case FrameError::kBadVersion:
      ++n_bad_header;
      break;
    case FrameError::kOversize:
      ++n_oversize;
      break;
    case FrameError::kTruncated:
      ++n_truncated;
      break;
    case FrameError::kNone:
      return;
  }
  if (options.log_rejects) {
    Log("rejected frame from " + peer + ": " + s.message() +
        "; closing connection");
  }
}

void ServerCore::LogRefused(const std::string& peer, const std::string& why) {
  ++n_refused;
  Log("refusing connection from " + peer + ": " + why);
}

void ServerCore::LogTimeout(const std::string& peer, const char* what) {
  ++n_timed_out;
  if (options.log_rejects) Log("closing connection from " + peer + ": " + what);
}

void ServerCore::Log(const std::string& line) {
  uint64_t dropped = 0;
  if (!log_limiter.Allow(LogLimiter::Clock::now(), &dropped)) return;
  if (dropped > 0) {
    std::fprintf(stderr, "%s: %s (%llu similar lines dropped before it)\n",
                 options.log_name.c_str(), line.c_str(),
                 static_cast<unsigned long long>(dropped));
  } else {
    std::fprintf(stderr, "%s: %s\n", options.log_name.c_str(), line.c_str());
  }
}

bool LogLimiter::Allow(Clock::time_point now, uint64_t* dropped) {
  MutexLock lock(&mu_);
  if (last_refill_ == Clock::time_point{}) last_refill_ = now;
  if (now > last_refill_ && every_.count() > 0) {
    const auto steps = (now - last_refill_) / every_;
    if (steps > 0) {
      tokens_ = static_cast<uint32_t>(
          std::min<int64_t>(burst_, tokens_ + static_cast<int64_t>(steps)));
      last_refill_ += steps * every_;
    }
  }
  if (tokens_ == 0) {
    ++dropped_;
    return false;
  }
  --tokens_;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

std::string IpOf(const std::string& peer) {
  size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

ConnectionLimits::Verdict ConnectionLimits::Check(const std::string& ip) const {
  auto it = ips_.find(ip);
  PerIp mine = it == ips_.end() ? PerIp{} : it->second;
  auto evict = [&] {
    if (mine.pending > 0) return Verdict::kEvictPendingSameIp;
    return pending_ > 0 ? Verdict::kEvictPendingAny : Verdict::kRefuse;
  };
  if (mine.open >= o_.max_connections_per_ip)
    return mine.pending > 0 ? Verdict::kEvictPendingSameIp : Verdict::kRefuse;
  if (open_ >= o_.max_connections) return evict();
  if (mine.pending >= o_.max_pending_per_ip)
    return Verdict::kEvictPendingSameIp;
  if (pending_ >= o_.max_pending) return evict();
  return Verdict::kAdmit;
}

std::string ConnectionLimits::Describe(const std::string& ip) const {
  auto it = ips_.find(ip);
  size_t mine = it == ips_.end() ? 0 : it->second.open;
  if (mine >= o_.max_connections_per_ip)
    return std::to_string(mine) + " connections open from " + ip + " (limit)";
  return std::to_string(open_) + " connections open (limit)";
}

void ConnectionLimits::Opened(const std::string& ip) {
  PerIp& p = ips_[ip];
  ++p.open;
  ++p.pending;
  ++open_;
  ++pending_;
}

void ConnectionLimits::Authenticated(const std::string& ip) {
  --ips_[ip].pending;
  --pending_;
}

void ConnectionLimits::Closed(const std::string& ip, bool pending) {
  auto it = ips_.find(ip);
  if (it == ips_.end()) return;
  --it->second.open;
  --open_;
  if (pending) {
    --it->second.pending;
    --pending_;
  }
  if (it->second.open == 0) ips_.erase(it);
}

bool ServerCore::Answer(Frame& request, const std::string& peer,
                        const Caller& caller, FrameHeader* rh,
                        RpcReply* reply) {
  const FrameHeader& h = request.header;
  if (h.flags & kFlagResponse) {
    CountReject(Status(EPROTO, "response frame sent to a server"), peer);
    return false;
  }
  ++n_requests;
  Status admitted = options.gate ? options.gate->Admit(caller) : Status::Ok();
  if (!admitted.ok()) {
    reply->payload = EncodeErrorResponse(admitted);
  } else if (h.type == static_cast<uint16_t>(MsgType::kPing)) {
    Msg<MsgType::kPing>::Request req;
    Status st = DecodeRequest<MsgType::kPing>(request.payload, &req)
                    ? Status::Ok()
                    : Status(EPROTO, "malformed Ping");
    reply->payload = EncodeResponse<MsgType::kPing>(
        st, {handler->Role(), uint32_t{kProtocolVersion}});
  } else {
    handler->Handle(caller, h.type, request.payload, request.bulk, reply);
  }
  *rh = FrameHeader();
  // A secure request gets a secure reply (SealFrame encrypts it) even from
  // a server not in secure mode: the client chose to hide its traffic.
  rh->flags = kFlagResponse | (h.flags & kFlagSecure);
  rh->type = h.type;
  rh->request_id = h.request_id;
  return true;
}

void ServerCore::RegisterSession(int fd, const Caller& caller) {
  if (caller.principal == Principal::kServer) return;  // never removed
  MutexLock lock(&sessions_mu_);
  sessions_[fd] = caller.entity;
}

void ServerCore::UnregisterSession(int fd) {
  MutexLock lock(&sessions_mu_);
  sessions_.erase(fd);
}

size_t ServerCore::CloseSessionsOf(const std::string& entity) {
  MutexLock lock(&sessions_mu_);
  size_t n = 0;
  for (const auto& [fd, who] : sessions_) {
    if (who != entity) continue;
    ::shutdown(fd, SHUT_RDWR);
    ++n;
  }
  return n;
}

}  // namespace stripefs::rpc

#include "backend/rpc/server_core.h"

#include <cstdio>

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
    std::fprintf(stderr, "%s: rejected frame from %s: %s; closing connection\n",
                 options.log_name.c_str(), peer.c_str(), s.message().c_str());
  }
}

void ServerCore::LogRefused(const std::string& peer, const std::string& why) {
  ++n_refused;
  std::fprintf(stderr, "%s: refusing connection from %s: %s\n",
               options.log_name.c_str(), peer.c_str(), why.c_str());
}

void ServerCore::LogTimeout(const std::string& peer, const char* what) {
  ++n_timed_out;
  if (options.log_rejects) {
    std::fprintf(stderr, "%s: closing connection from %s: %s\n",
                 options.log_name.c_str(), peer.c_str(), what);
  }
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
                        FrameHeader* rh, RpcReply* reply) {
  const FrameHeader& h = request.header;
  if (h.flags & kFlagResponse) {
    CountReject(Status(EPROTO, "response frame sent to a server"), peer);
    return false;
  }
  ++n_requests;
  if (h.type == static_cast<uint16_t>(MsgType::kPing)) {
    Msg<MsgType::kPing>::Request req;
    Status st = DecodeRequest<MsgType::kPing>(request.payload, &req)
                    ? Status::Ok()
                    : Status(EPROTO, "malformed Ping");
    reply->payload = EncodeResponse<MsgType::kPing>(
        st, {handler->Role(), uint32_t{kProtocolVersion}});
  } else {
    handler->Handle(h.type, request.payload, request.bulk, reply);
  }
  *rh = FrameHeader();
  rh->flags = kFlagResponse;
  rh->type = h.type;
  rh->request_id = h.request_id;
  return true;
}

}  // namespace stripefs::rpc

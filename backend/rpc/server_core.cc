#include "backend/rpc/server_core.h"

#include <cstdio>

#include "backend/rpc/wire_messages.h"

namespace stripefs::rpc {

RpcServerCounters ServerCore::Counters() const {
  RpcServerCounters c;
  c.connections = n_connections.load();
  c.open_connections = n_open.load();
  c.requests = n_requests.load();
  c.rejected_bad_mac = n_bad_mac.load();
  c.rejected_bad_crc = n_bad_crc.load();
  c.rejected_bad_header = n_bad_header.load();
  c.rejected_oversize = n_oversize.load();
  c.rejected_truncated = n_truncated.load();
  return c;
}

void ServerCore::CountReject(const Status& s, const std::string& peer) {
  switch (FrameErrorOf(s)) {
    case FrameError::kBadMac:
      ++n_bad_mac;
      break;
    case FrameError::kBadCrc:
      ++n_bad_crc;
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

void ServerCore::LogRefused(const std::string& peer, size_t open) const {
  std::fprintf(stderr,
               "%s: refusing connection from %s: %zu connections open "
               "(limit)\n",
               options.log_name.c_str(), peer.c_str(), open);
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

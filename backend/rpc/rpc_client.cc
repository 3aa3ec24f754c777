#include "backend/rpc/rpc_client.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

#include "backend/rpc/handshake.h"
#include "backend/rpc/wire_messages.h"

namespace stripefs::rpc {

namespace {

std::vector<std::string> SplitAddresses(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

RpcClient::RpcClient(std::string address, std::shared_ptr<const ClusterKey> key,
                     RpcClientOptions options)
    : address_(std::move(address)),
      addresses_(SplitAddresses(address_)),
      key_(std::move(key)),
      options_(std::move(options)),
      volume_(options_.expected_server.volume) {}

VolumeId RpcClient::volume() const {
  std::lock_guard<std::mutex> lock(mu_);
  return volume_;
}

RpcClient::~RpcClient() = default;

void RpcClient::CloseIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.clear();
}

Status RpcClient::Unreachable(const Status& cause) const {
  return Status::Unavailable(
      options_.peer_role + " at " + address_ + " is unreachable (" +
      cause.ToString() + "); is " + options_.peer_role +
      " running? check its --listen address, the --meta address given to "
      "chunkd, and `stripefs cluster status`");
}

Status RpcClient::AuthFailed(const std::string& what, const Status& s) const {
  return Status(EACCES, what + " failed authentication: " + s.message() +
                            "; servers use the cluster's server key file, "
                            "clients that key or an identity file of the "
                            "same cluster (--key; docs/cluster.md)");
}

Result<std::unique_ptr<RpcClient::Connection>> RpcClient::Connect(
    Deadline deadline, const std::string& what) {
  // Several addresses (metads serving one volume): start at the last one
  // that answered and move on while they refuse. Only a failed connect
  // moves on, so no request is ever sent twice.
  Result<UniqueFd> fd = Status::InvalidArgument("no address in " + address_);
  const size_t n = addresses_.size();
  const size_t first = preferred_.load();
  for (size_t i = 0; i < n; ++i) {
    Deadline cd = std::min(deadline, Clock::now() + options_.connect_timeout);
    fd = ConnectTcp(addresses_[(first + i) % n], cd);
    if (fd.ok()) {
      preferred_.store((first + i) % n);
      if (i != 0) failovers_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    if (fd.status().code() == EINVAL) return fd.status();  // bad address
  }
  if (!fd.ok()) return Unreachable(fd.status());
  ServerBinding expect = options_.expected_server;
  expect.volume = volume();
  ServerBinding server;
  Result<Session> s =
      ClientHandshake(fd->get(), *key_, expect, deadline, &server);
  if (s.ok() && IsZero(expect.volume) && !IsZero(server.volume)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (IsZero(volume_)) volume_ = server.volume;  // pinned from now on
  }
  if (!s.ok()) {
    const Status& e = s.status();
    if (e.code() == ETIMEDOUT)
      return Status(ETIMEDOUT, what +
                                   ": handshake timed out (server "
                                   "overloaded or stalled?)");
    if (e.code() == EACCES) return AuthFailed(what, e);
    if (e.code() == EPROTONOSUPPORT || e.code() == EPROTO)
      return Status(EPROTO, what + ": handshake failed: " + e.message());
    return Unreachable(e);
  }
  auto c = std::make_unique<Connection>();
  c->fd = std::move(fd).value();
  c->session = std::move(s).value();
  // Blocking with a receive timeout: a shaped reply waits in its recvmsg
  // (ReadFrameInto). Best effort: a socket left non-blocking just polls.
  const timeval slice{0, static_cast<suseconds_t>(kRecvSlice.count() * 1000)};
  const int fl = ::fcntl(c->fd.get(), F_GETFL);
  c->blocking = fl >= 0 &&
                ::setsockopt(c->fd.get(), SOL_SOCKET, SO_RCVTIMEO, &slice,
                             sizeof(slice)) == 0 &&
                ::fcntl(c->fd.get(), F_SETFL, fl & ~O_NONBLOCK) == 0;
  return c;
}

bool IsTransportError(const Status& s) {
  switch (s.code()) {
    case EHOSTDOWN:
    case ETIMEDOUT:
    case EPROTO:
      return true;
    default:
      return false;
  }
}

std::string RpcClient::What(uint16_t type) const {
  const char* name = MsgTypeName(type);
  return std::string(name ? name : "request") + " to " + options_.peer_role +
         " at " + address_;
}

Result<RpcResponse> RpcClient::Call(uint16_t type,
                                    std::span<const uint8_t> payload,
                                    std::span<const uint8_t> bulk,
                                    std::chrono::milliseconds timeout) {
  return CallGather(type, payload, BulkParts(&bulk, 1), timeout);
}

Result<RpcResponse> RpcClient::CallGather(uint16_t type,
                                          std::span<const uint8_t> payload,
                                          BulkParts bulk,
                                          std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = options_.call_timeout;
  return CallUntil(type, payload, bulk, {}, Clock::now() + timeout, SIZE_MAX);
}

Result<RpcResponse> RpcClient::CallInto(uint16_t type,
                                        std::span<const uint8_t> payload,
                                        std::span<uint8_t> bulk_in,
                                        Deadline deadline,
                                        size_t reply_payload) {
  return CallUntil(type, payload, {}, bulk_in, deadline, reply_payload);
}

std::unique_ptr<RpcClient::Connection> RpcClient::TakeIdle(uint16_t type) {
  // An idempotent call skips the readability probe (a system call): if the
  // connection broke while idle, the call fails with EHOSTDOWN and is
  // retried once on a fresh one.
  const bool probe = !MsgTypeIdempotent(type);
  std::lock_guard<std::mutex> lock(mu_);
  auto now = Clock::now();
  while (!idle_.empty()) {
    std::unique_ptr<Connection> c = std::move(idle_.back());
    idle_.pop_back();
    if (now - c->idle_since < options_.max_idle_time &&
        !(probe && IdleConnectionBroken(c->fd.get()))) {
      return c;
    }
  }
  return nullptr;
}

Result<RpcResponse> RpcClient::CallUntil(
    uint16_t type, std::span<const uint8_t> payload, BulkParts bulk,
    std::span<uint8_t> bulk_in, Deadline deadline, size_t reply_payload) {
  if (!key_) return Status::InvalidArgument("RpcClient has no cluster key");
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The retry always connects afresh: the other idle connections were
    // opened to the same server and are likely just as dead (a restart).
    std::unique_ptr<Connection> conn = attempt == 0 ? TakeIdle(type) : nullptr;
    bool reused = conn != nullptr;
    if (!reused) {
      STRIPEFS_ASSIGN_OR_RETURN(conn, Connect(deadline, What(type)));
    }
    Result<RpcResponse> r = CallOnce(type, payload, bulk, bulk_in,
                                     std::move(conn), deadline, reply_payload);
    if (r.ok() || !reused || r.status().code() != EHOSTDOWN ||
        !MsgTypeIdempotent(type) || Clock::now() >= deadline) {
      return r;
    }
    // A pooled connection died under us: retry once on a fresh one, and
    // forget the other idle ones (same server, same fate).
    std::lock_guard<std::mutex> lock(mu_);
    idle_.clear();
  }
  return Status::Unavailable("unreachable");  // not reached
}

Result<RpcResponse> RpcClient::CallOnce(
    uint16_t type, std::span<const uint8_t> payload, BulkParts bulk,
    std::span<uint8_t> bulk_in, std::unique_ptr<Connection> conn,
    Deadline deadline, size_t reply_payload) {
  const Deadline started = Clock::now();
  // Error texts are built only on the error paths (none per good call).
  auto timeout_status = [&] {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - started);
    return Status(ETIMEDOUT, What(type) + " timed out after " +
                                 std::to_string(ms.count()) +
                                 " ms (server overloaded or stalled?)");
  };
  FrameHeader h;
  h.type = type;
  h.request_id = next_request_id_.fetch_add(1);
  int fd = conn->fd.get();
  Status ws =
      WriteFrameGather(fd, conn->session.send, h, payload, bulk, deadline);
  if (!ws.ok()) {
    if (ws.code() == ETIMEDOUT) return timeout_status();
    if (ws.code() == EMSGSIZE) return ws;
    return Unreachable(ws);
  }
  bool in_place = false;
  ReplyShape shape;
  shape.payload = reply_payload;
  if (conn->blocking) shape.block = kRecvSlice;
  Result<Frame> f = ReadFrameInto(fd, conn->session.recv, deadline, bulk_in,
                                  &in_place, shape);
  if (!f.ok()) {
    const Status& s = f.status();
    if (s.code() == ETIMEDOUT) return timeout_status();
    if (s.code() == EACCES) return AuthFailed(What(type), s);
    if (FrameErrorOf(s) != FrameError::kNone && s.code() != ECONNRESET)
      return Status(EPROTO,
                    What(type) + ": bad response frame: " + s.message());
    return Unreachable(s);
  }
  const FrameHeader& rh = f->header;
  if (!(rh.flags & kFlagResponse) || rh.request_id != h.request_id ||
      rh.type != type) {
    return Status(EPROTO, What(type) +
                              ": response does not match the request (id " +
                              std::to_string(rh.request_id) + " vs " +
                              std::to_string(h.request_id) + ")");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < options_.max_idle_connections) {
      conn->idle_since = Clock::now();
      idle_.push_back(std::move(conn));
    }
  }
  RpcResponse out;
  out.payload = std::move(f->payload);
  out.bulk = std::move(f->bulk);
  out.bulk_in_place = in_place;
  return out;
}

}  // namespace stripefs::rpc

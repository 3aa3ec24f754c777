// RpcClient: calls one RPC server (metad or a chunkd) at a fixed address.
//
// The address may list several servers, "HOST:PORT,HOST:PORT" (metads that
// serve one volume from etcd): a new connection goes to the one that last
// answered and moves to the next when it cannot connect (never after a
// request was sent, so nothing is applied twice).
//
// Keeps a pool of idle TCP connections, each with its session (handshake.h:
// a new connection proves the cluster key both ways before its first
// request and gets its own frame keys); each call takes one (or opens a
// new one), so calls from many threads run in parallel on separate
// connections (no multiplexing). Connections idle for longer than
// options.max_idle_time are closed rather than reused (servers close idle
// connections after their idle timeout, 5 min by default). Every call has a
// deadline (options.call_timeout): a server that does not answer in time yields
// ETIMEDOUT and its connection is dropped, so a caller such as the stripe
// client can reconstruct from other chunks instead of waiting. Connections
// broken while idle (server restart) are detected before reuse and replaced
// (for a non-idempotent call: a poll per call); idempotent calls skip that
// probe and are retried once on a fresh connection if a reused one fails.
// Responses are matched to requests by request id. A good chunk read
// (CallInto with a known reply shape) makes two system calls: sendmsg, and
// one blocking recvmsg of header+payload+bulk+tag that is also the wait;
// other calls poll, recv the header, recvmsg the rest. No strings are built
// on a good call.
//
// Errors: EHOSTDOWN (Status::Unavailable) when the server cannot be reached
// or the connection breaks, with the address and a hint in the message;
// ETIMEDOUT past the deadline; EACCES when the handshake fails or the server
// rejects our frames (cluster key mismatch); EPROTO for a malformed
// response or a server speaking another protocol version. Use
// IsTransportError() to tell these apart from errors the server returned.
//
// Thread-safety: all methods may be called concurrently. Connecting is lazy:
// constructing never fails and never blocks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/frame.h"
#include "backend/rpc/session.h"
#include "backend/rpc/tcp_socket.h"
#include "common/status.h"

namespace stripefs::rpc {

struct RpcClientOptions {
  std::chrono::milliseconds call_timeout{10000};
  std::chrono::milliseconds connect_timeout{2000};
  size_t max_idle_connections = 16;
  // Well below the servers' idle timeout, so a pooled connection is not
  // reused just as the server closes it.
  std::chrono::milliseconds max_idle_time{60000};
  // Names the peer in error messages: "chunkd", "metad".
  std::string peer_role = "server";
  // The server this client means to reach (its role and id from the
  // cluster map): a handshake with any other server fails with EACCES
  // before a frame is sent. kAny: whatever server answers (tools given
  // one address by the operator). Its volume, when all zero, is learned
  // from the first server that answers and then expected of every later
  // connection of this client (a metad given by address pins its volume).
  ServerBinding expected_server;
};

struct RpcResponse {
  std::vector<uint8_t> payload;
  AlignedBytes bulk;
  bool bulk_in_place = false;  // CallInto: the bulk is in the caller's span
};

class RpcClient {
 public:
  RpcClient(std::string address, std::shared_ptr<const ClusterKey> key,
            RpcClientOptions options = {});
  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // Sends one request (payload + optional bulk, sent without copying) and
  // waits for its response until the deadline: now + `timeout`, or
  // options.call_timeout when `timeout` is zero. A call that times out
  // closes its connection (a late response must never be read by the next
  // call), so an abandoned call never leaves a broken pooled connection.
  Result<RpcResponse> Call(uint16_t type, std::span<const uint8_t> payload,
                           std::span<const uint8_t> bulk = {},
                           std::chrono::milliseconds timeout = {});
  // Call() whose bulk is the concatenation of `bulk`'s buffers, each sent
  // from where it is (one gather list, no copy into one buffer).
  Result<RpcResponse> CallGather(uint16_t type,
                                 std::span<const uint8_t> payload,
                                 BulkParts bulk,
                                 std::chrono::milliseconds timeout = {});

  // Call() with an absolute deadline whose response bulk, when it is
  // exactly bulk_in.size() bytes, is received straight into `bulk_in`
  // (RpcResponse::bulk_in_place; no vector, no copy); any other bulk lands
  // in RpcResponse::bulk. On error bulk_in holds unspecified bytes.
  // `reply_payload`: the payload length of a successful reply when the
  // caller knows it (SIZE_MAX: not known); the reply is then received with
  // one blocking recvmsg, which is also the wait (ReadFrameInto, ReplyShape).
  Result<RpcResponse> CallInto(uint16_t type, std::span<const uint8_t> payload,
                               std::span<uint8_t> bulk_in, Deadline deadline,
                               size_t reply_payload = SIZE_MAX);

  const std::string& address() const { return address_; }
  const ClusterKey& key() const { return *key_; }
  const RpcClientOptions& options() const { return options_; }
  // New connections that went to another server of the address list than
  // the one that answered before (the preferred one refused): failovers.
  uint64_t failovers() const {
    return failovers_.load(std::memory_order_relaxed);
  }
  // The volume the servers of this client serve: expected_server's, or the
  // one learned from the first handshake (all zero before it).
  VolumeId volume() const;
  // Drops every idle connection (e.g. after the map says the server moved).
  void CloseIdle();

 private:
  // After the handshake a connection's fd is put in blocking mode with a
  // receive timeout of kRecvSlice, so a reply of known shape is waited for
  // in its recvmsg (no poll); every other receive and send passes
  // MSG_DONTWAIT and polls for its deadline as before.
  static constexpr std::chrono::milliseconds kRecvSlice{50};
  struct Connection {
    UniqueFd fd;
    Session session;
    Clock::time_point idle_since;
    bool blocking = false;  // fd blocking with SO_RCVTIMEO = kRecvSlice
  };
  Result<std::unique_ptr<Connection>> Connect(Deadline deadline,
                                              const std::string& what);
  Result<RpcResponse> CallUntil(uint16_t type, std::span<const uint8_t> payload,
                                BulkParts bulk, std::span<uint8_t> bulk_in,
                                Deadline deadline, size_t reply_payload);
  Result<RpcResponse> CallOnce(uint16_t type, std::span<const uint8_t> payload,
                               BulkParts bulk, std::span<uint8_t> bulk_in,
                               std::unique_ptr<Connection> conn,
                               Deadline deadline, size_t reply_payload);
  // A pooled connection fit for a call of `type`, or null.
  std::unique_ptr<Connection> TakeIdle(uint16_t type);
  // "ReadChunk to chunkd at HOST:PORT", for error messages.
  std::string What(uint16_t type) const;
  Status Unreachable(const Status& cause) const;
  Status AuthFailed(const std::string& what, const Status& s) const;

  const std::string address_;
  const std::vector<std::string> addresses_;  // address_ split at ','
  std::atomic<size_t> preferred_{0};          // the last one that connected
  std::atomic<uint64_t> failovers_{0};
  const std::shared_ptr<const ClusterKey> key_;
  const RpcClientOptions options_;
  std::atomic<uint64_t> next_request_id_{1};
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
  VolumeId volume_;  // guarded by mu_
};

// True for errors made by the transport (unreachable, timeout, rejected,
// malformed response), false for errors the remote service returned.
// The remote service's own EHOSTDOWN is impossible (servers never send it).
bool IsTransportError(const Status& s);

}  // namespace stripefs::rpc

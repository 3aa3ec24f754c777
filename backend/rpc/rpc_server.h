// RpcServer: accepts TCP connections and answers framed requests through an
// RpcHandler.
//
// Default loop (UringServerLoop): one io_uring thread accepts, receives and
// sends for every connection; decoded requests run on a bounded pool of
// worker threads (options.worker_threads), so handlers may block on disk or
// RocksDB. Requests the handler declares cheap (RpcHandler::InlineSafe) are
// instead verified, handled and sealed on the io_uring thread itself, which
// saves the two thread hand-offs of a worker call (options.inline_requests).
// Requests of one connection are handled one at a time and answered in
// order, inline or not. If io_uring cannot be set up (io_uring_disabled sysctl,
// seccomp, old kernel) or options.use_io_uring is false, the server logs one
// line and uses PollServerLoop (poll + a thread per connection) instead.
//
// Every connection starts with the session handshake (handshake.h); until
// the client has proven it holds the cluster key the server keeps only a
// small fixed state for it (no buffer sized from anything the peer sent),
// and such "pending" connections are limited in number, per peer IP and in
// total, and in time (handshake_timeout); when a limit is reached the
// oldest pending connection is dropped, so a flood of idle or half-open
// connections cannot lock a legitimate client out. Authenticated
// connections are closed after idle_timeout without a request, or when a
// started frame header does not complete within header_timeout.
//
// Every frame is checked (magic, version, lengths, then its Poly1305 tag under
// the connection's key and sequence number, so replayed or reordered frames
// fail) before the handler sees it; a bad frame or handshake is counted,
// logged with one line on stderr, answered with a reject frame (so the
// client can report why) and its connection closed. The server never
// crashes on input. Ping requests are answered by the server itself.
//
// Ownership: the server does not own the handler; it must outlive Stop().
// Thread-safety: Start/Stop/address/counters may be called from any thread.
// Stop() closes the listener, shuts every connection down and joins the
// threads; a handler call in progress is waited for.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/frame.h"
#include "backend/rpc/identity.h"
#include "backend/rpc/tcp_socket.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {

// What a handler sends back: an encoded payload and optional bulk bytes.
// The bulk is sent from `bulk` with one gather write after Handle returns,
// so it must point into `bulk_storage` (the usual case: move the data
// vector there), into `bulk_lease` (a pooled buffer, given back once the
// reply is sent) or into memory that outlives the reply.
struct RpcReply {
  std::vector<uint8_t> payload;
  AlignedBytes bulk_storage;
  BufferPool::Lease bulk_lease;
  std::span<const uint8_t> bulk;
};

class RpcHandler {
 public:
  virtual ~RpcHandler() = default;
  // Role reported by Ping ("metad", "chunkd", ...).
  virtual std::string Role() const = 0;
  // Handles one authenticated request from `caller` (the identity its
  // connection proved; the handler decides what that identity may call).
  // `bulk` may be moved from.
  virtual void Handle(const Caller& caller, uint16_t type,
                      std::span<const uint8_t> payload, AlignedBytes& bulk,
                      RpcReply* reply) = 0;
  // True if this authenticated request may be handled on the server's event
  // loop thread: Handle answers it in microseconds and never sleeps (no
  // fsync, no wait for another thread's I/O, no network call, no lock held
  // across any of those). The io_uring loop asks only for frames of at most
  // kMaxInlineFrameBytes whose connection has no earlier request with a
  // worker, and then runs Handle on its own thread: every connection waits
  // while it runs, so when in doubt answer false (the default). Called on
  // the loop thread; must itself be cheap and must not throw.
  virtual bool InlineSafe(uint16_t /*type*/,
                          std::span<const uint8_t> /*payload*/) const {
    return false;
  }
};

// Frames (payload + bulk) larger than this are never handled inline: their
// tag check and copy would hold up the event loop.
inline constexpr size_t kMaxInlineFrameBytes = 64 << 10;

struct RpcServerOptions {
  std::string listen = "127.0.0.1:0";  // "HOST:PORT" or "PORT"
  // Open connections, total and per peer IP (pending ones included).
  size_t max_connections = 1024;
  size_t max_connections_per_ip = 1024;
  // Connections that have not finished the handshake, total and per IP.
  size_t max_pending = 256;
  size_t max_pending_per_ip = 64;
  // Accept -> handshake done; first byte of a frame -> its whole header;
  // authenticated connection with nothing in flight -> closed.
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds idle_timeout{300000};
  // io_uring event loop (false: poll + a thread per connection).
  bool use_io_uring = true;
  // Threads running handler calls in the io_uring loop (at most this many
  // requests are handled at once; each connection has at most one).
  size_t worker_threads = 16;
  // Let the io_uring loop handle the requests RpcHandler::InlineSafe names
  // on its own thread (false: every request goes to a worker).
  bool inline_requests = true;
  // Who this server is (role, id): in every ServerHello, under the proofs,
  // so clients that expect another server refuse the connection.
  ServerBinding binding;
  // Asked after each handshake and before each request whether the
  // caller's identity is (still) admitted; null: every identity derived
  // from the server key is. Not owned; outlives the server.
  const IdentityGate* gate = nullptr;
  std::string log_name = "rpc";  // prefix of log lines
  bool log_rejects = true;
};

struct RpcServerCounters {
  uint64_t connections = 0;       // accepted since Start
  uint64_t open_connections = 0;  // open right now
  uint64_t requests = 0;
  uint64_t inline_requests = 0;   // of `requests`, handled on the loop thread
  uint64_t rejected_bad_mac = 0;  // frame tag (replay, wrong key), or
                                  // unencrypted in secure mode
  uint64_t rejected_bad_handshake = 0;  // client proof mismatch
  uint64_t rejected_bad_header = 0;     // magic, flags, version
  uint64_t rejected_oversize = 0;
  uint64_t rejected_truncated = 0;
  uint64_t pending_connections = 0;    // open, handshake not done, right now
  uint64_t refused_connections = 0;    // over a limit (refused or evicted)
  uint64_t timed_out_connections = 0;  // handshake/header/idle timeout
  uint64_t rejected_total() const {
    return rejected_bad_mac + rejected_bad_handshake + rejected_bad_header +
           rejected_oversize + rejected_truncated;
  }
};

struct ServerCore;
class ServerLoop;

class RpcServer {
 public:
  static Result<std::unique_ptr<RpcServer>> Start(
      RpcServerOptions options, std::shared_ptr<const ClusterKey> key,
      RpcHandler* handler);
  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  // The bound "ip:port" (the real port when listening on port 0).
  const std::string& address() const { return address_; }
  RpcServerCounters counters() const;
  // True when the io_uring loop serves (false: the poll fallback).
  bool using_io_uring() const { return using_io_uring_; }
  // Closes every open session of identity `entity` now (its identity was
  // removed): a call in progress finishes, its reply may be lost, and the
  // client sees the connection closed. Returns how many were open.
  size_t CloseSessionsOf(const std::string& entity);
  void Stop();

 private:
  RpcServer() = default;

  std::unique_ptr<ServerCore> core_;
  std::string address_;
  UniqueFd listen_fd_;
  std::unique_ptr<ServerLoop> loop_;
  bool using_io_uring_ = false;
  Mutex stop_mu_;  // Stop() from several threads: one stops, the rest wait
  bool stopped_ STRIPEFS_GUARDED_BY(stop_mu_) = false;
};

}  // namespace stripefs::rpc

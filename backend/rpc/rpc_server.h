// RpcServer: accepts TCP connections and answers framed requests through an
// RpcHandler, one thread per connection (blocking handler calls are fine).
//
// Every incoming frame is checked (magic, version, lengths, CRC32C, HMAC)
// before the handler sees it; a bad frame is counted, logged with one line on
// stderr, answered with a reject frame (so the client can report why) and
// its connection closed. The server never crashes on input. Ping requests
// are answered by the server itself.
//
// Ownership: the server does not own the handler; it must outlive Stop().
// Thread-safety: Start/Stop/address/counters may be called from any thread.
// Stop() closes the listener, shuts every connection down and joins the
// threads; a handler call in progress is waited for.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/frame.h"
#include "backend/rpc/tcp_socket.h"
#include "common/status.h"

namespace stripefs::rpc {

// What a handler sends back: an encoded payload and optional bulk bytes.
// The bulk is sent from `bulk` with one gather write after Handle returns,
// so it must point into `bulk_storage` (the usual case: move the data
// vector there) or into memory that outlives the reply.
struct RpcReply {
  std::vector<uint8_t> payload;
  std::vector<uint8_t> bulk_storage;
  std::span<const uint8_t> bulk;
};

class RpcHandler {
 public:
  virtual ~RpcHandler() = default;
  // Role reported by Ping ("metad", "chunkd", ...).
  virtual std::string Role() const = 0;
  // Handles one authenticated request. `bulk` may be moved from.
  virtual void Handle(uint16_t type, std::span<const uint8_t> payload,
                      std::vector<uint8_t>& bulk, RpcReply* reply) = 0;
};

struct RpcServerOptions {
  std::string listen = "127.0.0.1:0";  // "HOST:PORT" or "PORT"
  size_t max_connections = 1024;
  std::string log_name = "rpc";  // prefix of log lines
  bool log_rejects = true;
};

struct RpcServerCounters {
  uint64_t connections = 0;
  uint64_t requests = 0;
  uint64_t rejected_bad_mac = 0;
  uint64_t rejected_bad_crc = 0;
  uint64_t rejected_bad_header = 0;  // magic, flags, version
  uint64_t rejected_oversize = 0;
  uint64_t rejected_truncated = 0;
  uint64_t rejected_total() const {
    return rejected_bad_mac + rejected_bad_crc + rejected_bad_header +
           rejected_oversize + rejected_truncated;
  }
};

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
  void Stop();

 private:
  struct Connection {
    UniqueFd fd;
    std::string peer;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  RpcServer(RpcServerOptions options, std::shared_ptr<const ClusterKey> key,
            RpcHandler* handler);
  void AcceptLoop();
  void Serve(Connection* c);
  void Reap(bool all);
  void CountReject(const Status& s, const std::string& peer);

  RpcServerOptions options_;
  std::shared_ptr<const ClusterKey> key_;
  RpcHandler* handler_;
  std::string address_;
  UniqueFd listen_fd_;
  UniqueFd wake_read_, wake_write_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool stopped_ = false;

  std::mutex mu_;  // guards conns_
  std::list<std::unique_ptr<Connection>> conns_;

  std::atomic<uint64_t> n_connections_{0}, n_requests_{0}, n_bad_mac_{0},
      n_bad_crc_{0}, n_bad_header_{0}, n_oversize_{0}, n_truncated_{0};
};

}  // namespace stripefs::rpc

// The session handshake that opens every connection (layout in frame.h,
// keys and proofs in session.h):
//   client -> server  ClientHello (Nc)
//   server -> client  ServerHello (Ns, server proof)
//   client -> server  ClientProof (client proof), then frames.
// The client checks the server's proof before it sends anything that
// matters; the server checks the client's before it reads a frame, so an
// unauthenticated peer never gets a buffer sized from a header.
//
// ServerHandshake is the server's side as a small fixed-size state machine
// (no allocation; ~200 bytes) for event loops: it says where to receive,
// and consumes exactly the bytes of the two client messages, never a byte
// of the frames behind them. ClientHandshake / RunServerHandshake are the
// blocking forms over a non-blocking socket with a deadline.
//
// Thread-safety: none (one per connection).
#pragma once

#include <span>

#include "backend/rpc/frame.h"
#include "backend/rpc/session.h"
#include "common/status.h"

namespace stripefs::rpc {

class ServerHandshake {
 public:
  ServerHandshake();  // draws the server nonce

  // Where the next bytes from the client go (exactly what the current
  // message still needs); empty once done.
  std::span<uint8_t> RecvBuffer();
  // `n` bytes arrived in RecvBuffer(). After the ClientHello is complete,
  // server_hello() must be sent; after the ClientProof, done() is true.
  // Errors: EPROTO / EPROTONOSUPPORT (not a ClientHello / other version),
  // EKEYREJECTED (client proof mismatch). Not usable after an error.
  Status Commit(size_t n, const ClusterKey& key);
  bool hello_ready() const { return step_ >= Step::kProof; }
  std::span<const uint8_t> server_hello() const { return server_hello_; }
  bool done() const { return step_ == Step::kDone; }
  // True when part of a client message has arrived.
  bool started() const { return have_ > 0 || step_ != Step::kHello; }
  // The server's session; call once, when done().
  Session TakeSession(const ClusterKey& key) const;

 private:
  enum class Step { kHello, kProof, kDone };
  Step step_ = Step::kHello;
  size_t have_ = 0;
  Nonce client_{};
  Nonce server_{};
  uint8_t in_[kClientHelloSize] = {};  // the larger of the two messages
  uint8_t server_hello_[kServerHelloSize] = {};
};
static_assert(kClientHelloSize >= kClientProofSize);

// Runs the client side on `fd`. EACCES when the server's proof is wrong or
// it rejected us, EPROTONOSUPPORT when it speaks another version (message
// names both), transport errors as ReadFull/SendAll.
Result<Session> ClientHandshake(int fd, const ClusterKey& key,
                                Deadline deadline);
// Runs the server side on `fd` (the poll loop).
Result<Session> RunServerHandshake(int fd, const ClusterKey& key,
                                   Deadline deadline);

// Checks a ServerHello (exactly kServerHelloSize bytes) for the client's
// nonce: the session on success. Exposed for the fuzz target.
Result<Session> AcceptServerHello(std::span<const uint8_t> hello,
                                  const ClusterKey& key, const Nonce& client);

}  // namespace stripefs::rpc

// The session handshake that opens every connection (layout in frame.h,
// keys and proofs in session.h, identities in identity.h):
//   client -> server  ClientHello (Nc, identity name and salt)
//   server -> client  ServerHello (Ns, server role, id and volume, proof)
//   client -> server  ClientProof (client proof), then frames.
// The client checks the server's proof and that the server is the one it
// meant to reach before it sends anything else: after a failed check it
// sends no proof (a fake server learns nothing it could replay or test
// keys against) and closes. The server checks the client's proof and asks
// its IdentityGate before it reads a frame, so an unauthenticated peer
// never gets a buffer sized from a header.
//
// ServerHandshake is the server's side as a small fixed-size state machine
// (no allocation; ~450 bytes) for event loops: it says where to receive,
// and consumes exactly the bytes of the two client messages, never a byte
// of the frames behind them. ClientHandshake / RunServerHandshake are the
// blocking forms over a non-blocking socket with a deadline.
//
// Thread-safety: none (one per connection).
#pragma once

#include <span>

#include "backend/rpc/frame.h"
#include "backend/rpc/identity.h"
#include "backend/rpc/session.h"
#include "common/status.h"

namespace stripefs::rpc {

// What the server side of a handshake needs; the pointees outlive it.
struct ServerAuth {
  const ClusterKey* key = nullptr;     // the server key
  ServerBinding binding;               // who this server is
  const IdentityGate* gate = nullptr;  // null: every derived identity
};

class ServerHandshake {
 public:
  ServerHandshake();  // draws the server nonce

  // Where the next bytes from the client go (exactly what the current
  // message still needs, the ClientHello's 8-byte prefix on its own so a
  // peer of another version is refused at once); empty once done.
  std::span<uint8_t> RecvBuffer();
  // `n` bytes arrived in RecvBuffer(). After the ClientHello is complete,
  // server_hello() must be sent; after the ClientProof, done() is true.
  // Errors: EPROTO / EPROTONOSUPPORT (not a ClientHello / other version),
  // EKEYREJECTED (malformed identity, client proof mismatch, or the gate
  // refused the identity). Not usable after an error.
  Status Commit(size_t n, const ServerAuth& auth);
  bool hello_ready() const { return step_ >= Step::kProof; }
  std::span<const uint8_t> server_hello() const { return server_hello_; }
  bool done() const { return step_ == Step::kDone; }
  // True when part of a client message has arrived.
  bool started() const { return have_ > 0 || step_ != Step::kHello; }
  // The server's session; call once, when done().
  Session TakeSession() const;
  // The identity the client proved; when done().
  Caller caller() const;

 private:
  enum class Step { kHello, kProof, kDone };
  Step step_ = Step::kHello;
  size_t have_ = 0;
  Nonce server_{};
  ClusterKey identity_key_;  // of the client's identity, once its hello is in
  uint8_t hello_[kClientHelloSize] = {};
  uint8_t proof_[kClientProofSize] = {};
  uint8_t server_hello_[kServerHelloSize] = {};
};

// Runs the client side on `fd` with `key` (its identity), expecting the
// server `expect` (role kAny: any server; an all-zero volume: any volume).
// EACCES when the server's proof is wrong, it is another server or serves
// another volume than expected, or it rejected us; EPROTONOSUPPORT when it
// speaks another version (message names both), transport errors as
// ReadFull/SendAll. *server (if given) is what the server said it is.
Result<Session> ClientHandshake(int fd, const ClusterKey& key,
                                ServerBinding expect, Deadline deadline,
                                ServerBinding* server = nullptr);
// Runs the server side on `fd` (the poll loop); *caller is the identity
// the client proved.
Result<Session> RunServerHandshake(int fd, const ServerAuth& auth,
                                   Deadline deadline, Caller* caller);

// Checks a ServerHello (exactly kServerHelloSize bytes) answering
// `client_hello`: the session on success. Exposed for the fuzz target.
Result<Session> AcceptServerHello(std::span<const uint8_t> hello,
                                  const ClusterKey& key,
                                  std::span<const uint8_t> client_hello,
                                  ServerBinding expect,
                                  ServerBinding* server = nullptr);
// Fills a ClientHello for `key`'s identity with nonce `client`.
void EncodeClientHello(const ClusterKey& key, const Nonce& client,
                       uint8_t out[kClientHelloSize]);

}  // namespace stripefs::rpc

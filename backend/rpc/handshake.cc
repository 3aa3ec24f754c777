#include "backend/rpc/handshake.h"

#include <cstring>

namespace stripefs::rpc {
namespace {

constexpr std::chrono::milliseconds kRejectWait{100};

// Reads a ServerHello, stopping early (and saying why) when the peer sent
// a reject frame or speaks another version.
Status ReadServerHello(int fd, uint8_t hello[kServerHelloSize], Deadline d) {
  STRIPEFS_RETURN_IF_ERROR(ReadFull(fd, hello, kHandshakePrefixSize, d, true));
  Status prefix = ParseHandshakePrefix(
      std::span<const uint8_t>(hello, kHandshakePrefixSize),
      HandshakeKind::kServerHello);
  if (!prefix.ok()) {
    if (prefix.code() == EACCES) {  // drain the rest of the reject frame
      uint8_t rest[kRejectFrameSize - kHandshakePrefixSize];
      (void)ReadFull(fd, rest, sizeof(rest),
                     std::min(d, Clock::now() + kRejectWait), true);
    }
    return prefix;
  }
  return ReadFull(fd, hello + kHandshakePrefixSize,
                  kServerHelloSize - kHandshakePrefixSize, d, true);
}

}  // namespace

ServerHandshake::ServerHandshake() : server_(RandomNonce()) {}

std::span<uint8_t> ServerHandshake::RecvBuffer() {
  size_t want = step_ == Step::kHello   ? kClientHelloSize
                : step_ == Step::kProof ? kClientProofSize
                                        : 0;
  return std::span<uint8_t>(in_ + have_, want - have_);
}

Status ServerHandshake::Commit(size_t n, const ClusterKey& key) {
  have_ += n;
  if (step_ == Step::kHello && have_ == kClientHelloSize) {
    STRIPEFS_RETURN_IF_ERROR(
        ParseHandshakePrefix(std::span<const uint8_t>(in_, kClientHelloSize),
                             HandshakeKind::kClientHello));
    std::memcpy(client_.data(), in_ + kHandshakePrefixSize, kNonceSize);
    EncodeHandshakePrefix(HandshakeKind::kServerHello, server_hello_);
    std::memcpy(server_hello_ + kHandshakePrefixSize, server_.data(),
                kNonceSize);
    Proof p = HandshakeProof(key, Role::kServer, client_, server_);
    std::memcpy(server_hello_ + kHandshakePrefixSize + kNonceSize, p.data(),
                kProofSize);
    step_ = Step::kProof;
    have_ = 0;
  } else if (step_ == Step::kProof && have_ == kClientProofSize) {
    STRIPEFS_RETURN_IF_ERROR(
        ParseHandshakePrefix(std::span<const uint8_t>(in_, kClientProofSize),
                             HandshakeKind::kClientProof));
    Proof want = HandshakeProof(key, Role::kClient, client_, server_);
    if (!MacEqual(want, std::span<const uint8_t>(in_ + kHandshakePrefixSize,
                                                 kProofSize))) {
      return Status(EKEYREJECTED,
                    "handshake proof mismatch (peer uses a different "
                    "cluster key, or replayed an old handshake)");
    }
    step_ = Step::kDone;
    have_ = 0;
  }
  return Status::Ok();
}

Session ServerHandshake::TakeSession(const ClusterKey& key) const {
  return DeriveSession(key, Role::kServer, client_, server_);
}

Result<Session> AcceptServerHello(std::span<const uint8_t> hello,
                                  const ClusterKey& key, const Nonce& client) {
  if (hello.size() != kServerHelloSize)
    return Status(EPROTO, "ServerHello of the wrong size");
  STRIPEFS_RETURN_IF_ERROR(
      ParseHandshakePrefix(hello, HandshakeKind::kServerHello));
  Nonce server;
  std::memcpy(server.data(), hello.data() + kHandshakePrefixSize, kNonceSize);
  Proof want = HandshakeProof(key, Role::kServer, client, server);
  if (!MacEqual(want,
                hello.subspan(kHandshakePrefixSize + kNonceSize, kProofSize))) {
    return Status(EACCES,
                  "server's handshake proof does not match (it uses a "
                  "different cluster key)");
  }
  return DeriveSession(key, Role::kClient, client, server);
}

Result<Session> ClientHandshake(int fd, const ClusterKey& key,
                                Deadline deadline) {
  Nonce client = RandomNonce();
  uint8_t hello[kClientHelloSize];
  EncodeHandshakePrefix(HandshakeKind::kClientHello, hello);
  std::memcpy(hello + kHandshakePrefixSize, client.data(), kNonceSize);
  iovec iov{hello, sizeof(hello)};
  STRIPEFS_RETURN_IF_ERROR(SendAll(fd, &iov, 1, deadline));
  uint8_t server_hello[kServerHelloSize];
  STRIPEFS_RETURN_IF_ERROR(ReadServerHello(fd, server_hello, deadline));
  Result<Session> s = AcceptServerHello(server_hello, key, client);
  // Our proof goes out even when the server's failed: then the server can
  // log the key mismatch too (the proof is bound to its nonce, so it is
  // worth nothing elsewhere).
  uint8_t proof[kClientProofSize];
  EncodeHandshakePrefix(HandshakeKind::kClientProof, proof);
  Nonce server;
  std::memcpy(server.data(), server_hello + kHandshakePrefixSize, kNonceSize);
  Proof p = HandshakeProof(key, Role::kClient, client, server);
  std::memcpy(proof + kHandshakePrefixSize, p.data(), kProofSize);
  iov = {proof, sizeof(proof)};
  Status sent = SendAll(fd, &iov, 1, deadline);
  if (!s.ok()) return s;
  STRIPEFS_RETURN_IF_ERROR(sent);
  return s;
}

Result<Session> RunServerHandshake(int fd, const ClusterKey& key,
                                   Deadline deadline) {
  ServerHandshake hs;
  while (!hs.done()) {
    std::span<uint8_t> buf = hs.RecvBuffer();
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, buf.data(), buf.size(), deadline, hs.started()));
    bool had_hello = hs.hello_ready();
    STRIPEFS_RETURN_IF_ERROR(hs.Commit(buf.size(), key));
    if (!had_hello && hs.hello_ready()) {
      std::span<const uint8_t> out = hs.server_hello();
      iovec iov{const_cast<uint8_t*>(out.data()), out.size()};
      STRIPEFS_RETURN_IF_ERROR(SendAll(fd, &iov, 1, deadline));
    }
  }
  return hs.TakeSession(key);
}

}  // namespace stripefs::rpc

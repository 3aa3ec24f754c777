#include "backend/rpc/handshake.h"

#include <cstring>
#include <string_view>

#include "common/coding.h"

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

Status Rejected(std::string why) {
  return Status(EKEYREJECTED, std::move(why));
}

// The identity name of a ClientHello: NUL-padded, nothing after the NULs.
Result<std::string_view> HelloName(const uint8_t* hello) {
  const char* p = reinterpret_cast<const char*>(hello + kHelloNameAt);
  size_t len = strnlen(p, kEntityNameMax);
  for (size_t i = len; i < kEntityNameMax; ++i)
    if (p[i] != 0) return Rejected("malformed identity in the ClientHello");
  std::string_view name(p, len);
  if (!ParseEntity(name).ok())
    return Rejected("ClientHello names no valid identity");
  return name;
}

std::span<const uint8_t> ServerHelloHead(const uint8_t* server_hello) {
  return {server_hello, kServerProofAt};
}

}  // namespace

void EncodeClientHello(const ClusterKey& key, const Nonce& client,
                       uint8_t out[kClientHelloSize]) {
  EncodeHandshakePrefix(HandshakeKind::kClientHello, out);
  std::memcpy(out + kHandshakePrefixSize, client.data(), kNonceSize);
  std::memcpy(out + kHelloSaltAt, key.salt().data(), kEntitySaltSize);
  std::memset(out + kHelloNameAt, 0, kEntityNameMax);
  std::string_view name = key.entity();
  std::memcpy(out + kHelloNameAt, name.data(),
              std::min(name.size(), kEntityNameMax));
}

ServerHandshake::ServerHandshake() : server_(RandomNonce()) {}

std::span<uint8_t> ServerHandshake::RecvBuffer() {
  if (step_ == Step::kHello) {
    // The prefix first, so an older peer (shorter hello) or a stray frame
    // header is refused at once instead of waiting for bytes never sent.
    size_t want =
        have_ < kHandshakePrefixSize ? kHandshakePrefixSize : kClientHelloSize;
    return std::span<uint8_t>(hello_ + have_, want - have_);
  }
  if (step_ == Step::kProof)
    return std::span<uint8_t>(proof_ + have_, kClientProofSize - have_);
  return {};
}

Status ServerHandshake::Commit(size_t n, const ServerAuth& auth) {
  have_ += n;
  if (step_ == Step::kHello && have_ == kHandshakePrefixSize) {
    STRIPEFS_RETURN_IF_ERROR(ParseHandshakePrefix(
        std::span<const uint8_t>(hello_, kHandshakePrefixSize),
        HandshakeKind::kClientHello));
  } else if (step_ == Step::kHello && have_ == kClientHelloSize) {
    STRIPEFS_RETURN_IF_ERROR(
        ParseHandshakePrefix(std::span<const uint8_t>(hello_, kClientHelloSize),
                             HandshakeKind::kClientHello));
    STRIPEFS_ASSIGN_OR_RETURN(std::string_view name, HelloName(hello_));
    EntitySalt salt;
    std::memcpy(salt.data(), hello_ + kHelloSaltAt, kEntitySaltSize);
    if (name == kServerEntity) {
      if (salt != EntitySalt{}) return Rejected("server identity with a salt");
      identity_key_ = *auth.key;
    } else {
      identity_key_ = auth.key->DeriveIdentity(name, salt);
    }
    uint8_t* out = server_hello_;
    EncodeHandshakePrefix(HandshakeKind::kServerHello, out);
    std::memcpy(out + kHandshakePrefixSize, server_.data(), kNonceSize);
    uint8_t* binding = out + kHandshakePrefixSize + kNonceSize;
    std::memset(binding, 0, kBindingSize);
    binding[0] = static_cast<uint8_t>(auth.binding.role);
    coding::StoreLe<uint32_t>(binding + 4, auth.binding.id);
    std::memcpy(binding + 8, auth.binding.volume.data(), kVolumeIdSize);
    Proof p =
        HandshakeProof(identity_key_, Role::kServer,
                       std::span<const uint8_t>(hello_), ServerHelloHead(out));
    std::memcpy(out + kServerProofAt, p.data(), kProofSize);
    step_ = Step::kProof;
    have_ = 0;
  } else if (step_ == Step::kProof && have_ == kClientProofSize) {
    STRIPEFS_RETURN_IF_ERROR(
        ParseHandshakePrefix(std::span<const uint8_t>(proof_, kClientProofSize),
                             HandshakeKind::kClientProof));
    Proof want = HandshakeProof(identity_key_, Role::kClient,
                                std::span<const uint8_t>(hello_),
                                ServerHelloHead(server_hello_));
    if (!MacEqual(want, std::span<const uint8_t>(proof_ + kHandshakePrefixSize,
                                                 kProofSize))) {
      return Rejected(
          "handshake proof mismatch for identity " +
          std::string(identity_key_.entity()) +
          " (peer holds another key: other cluster, removed identity, or a "
          "replayed handshake)");
    }
    if (auth.gate) {
      Status admitted = auth.gate->Admit(caller());
      if (!admitted.ok()) return Rejected(admitted.message());
    }
    step_ = Step::kDone;
    have_ = 0;
  }
  return Status::Ok();
}

Session ServerHandshake::TakeSession() const {
  return DeriveSession(identity_key_, Role::kServer,
                       std::span<const uint8_t>(hello_),
                       ServerHelloHead(server_hello_));
}

Caller ServerHandshake::caller() const {
  Caller c;
  c.principal = identity_key_.principal();
  c.entity = std::string(identity_key_.entity());
  c.salt = identity_key_.salt();
  return c;
}

Result<Session> AcceptServerHello(std::span<const uint8_t> hello,
                                  const ClusterKey& key,
                                  std::span<const uint8_t> client_hello,
                                  ServerBinding expect, ServerBinding* server) {
  if (hello.size() != kServerHelloSize ||
      client_hello.size() != kClientHelloSize)
    return Status(EPROTO, "ServerHello of the wrong size");
  STRIPEFS_RETURN_IF_ERROR(
      ParseHandshakePrefix(hello, HandshakeKind::kServerHello));
  Proof want = HandshakeProof(key, Role::kServer, client_hello,
                              ServerHelloHead(hello.data()));
  if (!MacEqual(want, hello.subspan(kServerProofAt, kProofSize))) {
    return Status(EACCES,
                  "server's handshake proof does not match (it uses a "
                  "different cluster key, or does not derive identity " +
                      std::string(key.entity()) + " from it)");
  }
  const uint8_t* b = hello.data() + kHandshakePrefixSize + kNonceSize;
  ServerBinding got{static_cast<ServerRole>(b[0]),
                    coding::LoadLe<uint32_t>(b + 4)};
  std::memcpy(got.volume.data(), b + 8, kVolumeIdSize);
  if (b[1] != 0 || b[2] != 0 || b[3] != 0)
    return Status(EPROTO, "ServerHello with reserved bits set");
  if (expect.role != ServerRole::kAny &&
      (got.role != expect.role || got.id != expect.id)) {
    return Status(EACCES, "reached " + DescribeServer(got) + ", expected " +
                              DescribeServer(expect) +
                              " (the address leads to another server: a "
                              "stale cluster map or a relay)");
  }
  if (!IsZero(expect.volume) && got.volume != expect.volume) {
    return Status(EACCES, "reached " + DescribeServer(got) + " of volume " +
                              VolumeIdHex(got.volume) + ", expected volume " +
                              VolumeIdHex(expect.volume) +
                              " (a server of another volume or cluster that "
                              "shares the key: a wrong address or a relay)");
  }
  if (server) *server = got;
  return DeriveSession(key, Role::kClient, client_hello,
                       ServerHelloHead(hello.data()));
}

Result<Session> ClientHandshake(int fd, const ClusterKey& key,
                                ServerBinding expect, Deadline deadline,
                                ServerBinding* server) {
  Nonce client = RandomNonce();
  uint8_t hello[kClientHelloSize];
  EncodeClientHello(key, client, hello);
  iovec iov{hello, sizeof(hello)};
  STRIPEFS_RETURN_IF_ERROR(SendAll(fd, &iov, 1, deadline));
  uint8_t server_hello[kServerHelloSize];
  STRIPEFS_RETURN_IF_ERROR(ReadServerHello(fd, server_hello, deadline));
  // No proof of ours goes out unless the server proved itself and is the
  // one we meant: a fake server must not get a proof to test keys against.
  STRIPEFS_ASSIGN_OR_RETURN(
      Session s, AcceptServerHello(server_hello, key, hello, expect, server));
  uint8_t proof[kClientProofSize];
  EncodeHandshakePrefix(HandshakeKind::kClientProof, proof);
  Proof p =
      HandshakeProof(key, Role::kClient, hello, ServerHelloHead(server_hello));
  std::memcpy(proof + kHandshakePrefixSize, p.data(), kProofSize);
  iov = {proof, sizeof(proof)};
  STRIPEFS_RETURN_IF_ERROR(SendAll(fd, &iov, 1, deadline));
  return s;
}

Result<Session> RunServerHandshake(int fd, const ServerAuth& auth,
                                   Deadline deadline, Caller* caller) {
  ServerHandshake hs;
  while (!hs.done()) {
    std::span<uint8_t> buf = hs.RecvBuffer();
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, buf.data(), buf.size(), deadline, hs.started()));
    bool had_hello = hs.hello_ready();
    STRIPEFS_RETURN_IF_ERROR(hs.Commit(buf.size(), auth));
    if (!had_hello && hs.hello_ready()) {
      std::span<const uint8_t> out = hs.server_hello();
      iovec iov{const_cast<uint8_t*>(out.data()), out.size()};
      STRIPEFS_RETURN_IF_ERROR(SendAll(fd, &iov, 1, deadline));
    }
  }
  if (caller) *caller = hs.caller();
  return hs.TakeSession();
}

}  // namespace stripefs::rpc

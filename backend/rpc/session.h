// Session keys of one connection: what the handshake (handshake.h) derives
// and what authenticates every frame after it (frame.h).
//
// The client holds the key K of its identity (identity.h: the server key
// itself for "server", a key derived from it for admin.NAME / client.NAME),
// the server derives the same K from the name and salt in the ClientHello.
// With T = ClientHello || ServerHello up to its proof (the whole handshake
// so far: protocol version, nonces Nc and Ns, the client's identity and the
// server's role, id and volume, frame.h), each end proves knowledge of K with
//   proof = HMAC-SHA256(K, label || T)
// (labels differ for client and server, so one proof cannot be reflected
// as the other), and each direction gets its own key
//   HKDF-SHA256(ikm = K, salt = T, info = "stripefs c2s" / "stripefs s2c").
// So a session is bound to the identity, the version and the server that
// answered: a relay to another server, or an edited version byte, fails.
// A frame is authenticated with the ChaCha20-Poly1305 AEAD (RFC 8439) used
// as a MAC (header, payload and bulk are additional data, nothing is
// encrypted, so bulk data is still sent from and received into the caller's
// buffers; the tag is Poly1305 under a one-time key drawn from ChaCha20 for
// this nonce) with a 96-bit nonce of 32 zero bits + the direction's 64-bit
// frame counter. Protocol version 2 used AES-256-GCM (GMAC) the same way;
// Poly1305 costs about half of GHASH per byte with OpenSSL 3.0 on our
// AVX-512 hosts (docs/wire-protocol.md). The counter
// is implicit (never on the wire): a frame replayed or reordered within its
// connection is checked against another counter value, and a frame from
// another connection against another key; either way its tag fails.
//
// Secure mode (ClusterKey::secure_wire(), frame flag kFlagSecure): the same
// AEAD with the same keys and nonces, but used as an AEAD: the header is the
// additional data and payload + bulk are encrypted, so a frame on the wire
// shows only its header (type, lengths, request id). A sending cipher in
// secure mode encrypts every frame; a receiving one refuses a frame that is
// not encrypted (a peer cannot downgrade: the flag is in the authenticated
// header). Without secure mode frames are authenticated only: data, names
// and ACLs cross the network in clear. docs/wire-protocol.md says what
// secure mode costs and why it is off by default.
//
// Thread-safety: a FrameCipher is used by one thread at a time (it holds an
// OpenSSL context and the counter); a Session is two of them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "common/status.h"

namespace stripefs::rpc {

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kProofSize = kMacSize;  // HMAC-SHA256
inline constexpr size_t kTagSize = 16;          // Poly1305
inline constexpr size_t kSessionKeySize = 32;   // ChaCha20

using Nonce = std::array<uint8_t, kNonceSize>;
using Proof = Mac;
using Tag = std::array<uint8_t, kTagSize>;

// One direction of a session: a key and the number of the next frame.
class FrameCipher {
 public:
  FrameCipher();  // keyless: Seal/Verify abort; assign a keyed one first
  explicit FrameCipher(std::span<const uint8_t, kSessionKeySize> key);
  FrameCipher(FrameCipher&&) noexcept;
  FrameCipher& operator=(FrameCipher&&) noexcept;
  ~FrameCipher();

  // Tag of the next frame (the concatenation of `parts`); advances.
  Tag Seal(std::span<const std::span<const uint8_t>> parts);
  // Checks `tag` against the next frame; advances either way (a failed
  // frame ends the connection). EACCES on mismatch.
  Status Verify(std::span<const std::span<const uint8_t>> parts,
                std::span<const uint8_t> tag);

  // Secure frames. Encrypts the concatenation of `body` into `out` (exactly
  // its size; may be one of the inputs only if it is the only one) with
  // `aad` authenticated, and returns the tag of the next frame; advances.
  Tag SealEncrypt(std::span<const uint8_t> aad,
                  std::span<const std::span<const uint8_t>> body,
                  uint8_t* out);
  // Checks `tag` of the next frame over `aad` and the encrypted `body`,
  // decrypting `body` in place; advances either way. EACCES on mismatch
  // (then `body` holds unspecified bytes and must not be used).
  Status OpenInPlace(std::span<const uint8_t> aad,
                     std::span<const std::span<uint8_t>> body,
                     std::span<const uint8_t> tag);

  // Sending: encrypt every frame. Receiving: refuse cleartext frames.
  void set_secure(bool on) { secure_ = on; }
  bool secure() const { return secure_; }
  // A buffer for the ciphertext of the frame being sent (WriteFrame): kept
  // between frames so a connection does not allocate one per frame.
  std::vector<uint8_t>& scratch() { return scratch_; }

  uint64_t next_sequence() const { return seq_; }

 private:
  Tag Compute(std::span<const std::span<const uint8_t>> parts);
  // Re-initialises the context for the next sequence number; advances.
  bool Start(bool encrypt);
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  uint64_t seq_ = 0;
  bool secure_ = false;
  std::vector<uint8_t> scratch_;
};

struct Session {
  FrameCipher send;
  FrameCipher recv;
};

enum class Role { kClient, kServer };

// Random nonce from OpenSSL's CSPRNG (aborts if it fails: unusable build).
Nonce RandomNonce();
// The proof `role` sends in the handshake whose transcript T (above) is
// `client_hello` || `server_hello_head`, under the identity's key.
Proof HandshakeProof(const ClusterKey& key, Role role,
                     std::span<const uint8_t> client_hello,
                     std::span<const uint8_t> server_hello_head);
// The session keys of `role` (send = its own direction) for that handshake,
// in secure mode when key.secure_wire() (secure frames are sealed with these
// same transcript-derived keys).
Session DeriveSession(const ClusterKey& key, Role role,
                      std::span<const uint8_t> client_hello,
                      std::span<const uint8_t> server_hello_head);

}  // namespace stripefs::rpc

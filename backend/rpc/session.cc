#include "backend/rpc/session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/coding.h"

namespace stripefs::rpc {
namespace {

constexpr std::string_view kClientLabel = "stripefs v2 client proof";
constexpr std::string_view kServerLabel = "stripefs v2 server proof";
constexpr std::string_view kClientToServer = "stripefs v2 c2s";
constexpr std::string_view kServerToClient = "stripefs v2 s2c";

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

struct FrameCipher::Ctx {
  EVP_CIPHER_CTX* evp = nullptr;
  ~Ctx() { EVP_CIPHER_CTX_free(evp); }
};

FrameCipher::FrameCipher() = default;
FrameCipher::FrameCipher(FrameCipher&&) noexcept = default;
FrameCipher& FrameCipher::operator=(FrameCipher&&) noexcept = default;
FrameCipher::~FrameCipher() = default;

FrameCipher::FrameCipher(std::span<const uint8_t, kSessionKeySize> key)
    : ctx_(std::make_unique<Ctx>()) {
  ctx_->evp = EVP_CIPHER_CTX_new();
  if (ctx_->evp == nullptr ||
      EVP_EncryptInit_ex(ctx_->evp, EVP_chacha20_poly1305(), nullptr,
                         key.data(), nullptr) != 1) {
    std::abort();  // OpenSSL without ChaCha20-Poly1305: unusable build
  }
}

Tag FrameCipher::Compute(std::span<const std::span<const uint8_t>> parts) {
  if (!ctx_) std::abort();  // keyless cipher used: a bug in the caller
  uint8_t iv[12] = {};
  coding::StoreLe<uint64_t>(iv + 4, seq_);
  ++seq_;
  EVP_CIPHER_CTX* c = ctx_->evp;
  int len = 0;
  bool ok = EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv) == 1;
  for (auto p : parts) {
    // Additional data only (a Poly1305 tag): nothing is encrypted.
    if (ok && !p.empty())
      ok = EVP_EncryptUpdate(c, nullptr, &len, p.data(),
                             static_cast<int>(p.size())) == 1;
  }
  uint8_t none[16];
  if (ok) ok = EVP_EncryptFinal_ex(c, none, &len) == 1;
  Tag tag{};
  if (ok)
    ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, kTagSize, tag.data()) ==
         1;
  if (!ok) std::abort();
  return tag;
}

Tag FrameCipher::Seal(std::span<const std::span<const uint8_t>> parts) {
  return Compute(parts);
}

Status FrameCipher::Verify(std::span<const std::span<const uint8_t>> parts,
                           std::span<const uint8_t> tag) {
  Tag want = Compute(parts);
  if (tag.size() != kTagSize ||
      CRYPTO_memcmp(want.data(), tag.data(), kTagSize) != 0) {
    return Status(EACCES,
                  "frame authentication failed (frame replayed, reordered, "
                  "from another connection, or the peer uses a different "
                  "cluster key)");
  }
  return Status::Ok();
}

Nonce RandomNonce() {
  Nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) std::abort();
  return n;
}

Proof HandshakeProof(const ClusterKey& key, Role role, const Nonce& client,
                     const Nonce& server) {
  std::span<const uint8_t> parts[] = {
      Bytes(role == Role::kClient ? kClientLabel : kServerLabel), client,
      server};
  return key.Compute(parts);
}

Session DeriveSession(const ClusterKey& key, Role role, const Nonce& client,
                      const Nonce& server) {
  uint8_t salt[2 * kNonceSize];
  std::memcpy(salt, client.data(), kNonceSize);
  std::memcpy(salt + kNonceSize, server.data(), kNonceSize);
  std::array<uint8_t, kSessionKeySize> c2s, s2c;
  key.Derive(salt, kClientToServer, c2s);
  key.Derive(salt, kServerToClient, s2c);
  Session s;
  s.send = FrameCipher(role == Role::kClient ? c2s : s2c);
  s.recv = FrameCipher(role == Role::kClient ? s2c : c2s);
  OPENSSL_cleanse(c2s.data(), c2s.size());
  OPENSSL_cleanse(s2c.data(), s2c.size());
  return s;
}

}  // namespace stripefs::rpc

#include "backend/rpc/session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/coding.h"

namespace stripefs::rpc {
namespace {

// The protocol version is in the transcript (every message's prefix), not
// in the labels.
constexpr std::string_view kClientLabel = "stripefs client proof";
constexpr std::string_view kServerLabel = "stripefs server proof";
constexpr std::string_view kClientToServer = "stripefs c2s";
constexpr std::string_view kServerToClient = "stripefs s2c";

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

bool FrameCipher::Start(bool encrypt) {
  if (!ctx_) std::abort();  // keyless cipher used: a bug in the caller
  uint8_t iv[12] = {};
  coding::StoreLe<uint64_t>(iv + 4, seq_);
  ++seq_;
  // The key set at construction is kept (key == nullptr).
  return EVP_CipherInit_ex(ctx_->evp, nullptr, nullptr, nullptr, iv,
                           encrypt ? 1 : 0) == 1;
}

Tag FrameCipher::Compute(std::span<const std::span<const uint8_t>> parts) {
  EVP_CIPHER_CTX* c = ctx_ ? ctx_->evp : nullptr;
  int len = 0;
  bool ok = Start(/*encrypt=*/true);
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

Tag FrameCipher::SealEncrypt(std::span<const uint8_t> aad,
                             std::span<const std::span<const uint8_t>> body,
                             uint8_t* out) {
  bool ok = Start(/*encrypt=*/true);
  EVP_CIPHER_CTX* c = ctx_->evp;
  int len = 0;
  if (ok && !aad.empty())
    ok = EVP_EncryptUpdate(c, nullptr, &len, aad.data(),
                           static_cast<int>(aad.size())) == 1;
  for (auto p : body) {
    // At most INT_MAX bytes per update: frames are far smaller (kMaxBulk).
    if (ok && !p.empty())
      ok = EVP_EncryptUpdate(c, out, &len, p.data(),
                             static_cast<int>(p.size())) == 1;
    out += p.size();
  }
  uint8_t none[16];
  if (ok) ok = EVP_EncryptFinal_ex(c, none, &len) == 1;
  Tag tag{};
  if (ok)
    ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, kTagSize, tag.data()) ==
         1;
  if (!ok) std::abort();  // cannot fail for valid sizes
  return tag;
}

Status FrameCipher::OpenInPlace(std::span<const uint8_t> aad,
                                std::span<const std::span<uint8_t>> body,
                                std::span<const uint8_t> tag) {
  bool ok = Start(/*encrypt=*/false);
  EVP_CIPHER_CTX* c = ctx_->evp;
  int len = 0;
  Tag want{};
  if (tag.size() == kTagSize) std::memcpy(want.data(), tag.data(), kTagSize);
  if (ok)
    ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, kTagSize,
                             want.data()) == 1;
  if (ok && !aad.empty())
    ok = EVP_DecryptUpdate(c, nullptr, &len, aad.data(),
                           static_cast<int>(aad.size())) == 1;
  for (auto p : body) {
    if (ok && !p.empty())
      ok = EVP_DecryptUpdate(c, p.data(), &len, p.data(),
                             static_cast<int>(p.size())) == 1;
  }
  uint8_t none[16];
  // DecryptFinal compares the tags (in constant time).
  if (ok) ok = EVP_DecryptFinal_ex(c, none, &len) == 1;
  if (!ok || tag.size() != kTagSize) {
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

Proof HandshakeProof(const ClusterKey& key, Role role,
                     std::span<const uint8_t> client_hello,
                     std::span<const uint8_t> server_hello_head) {
  std::span<const uint8_t> parts[] = {
      Bytes(role == Role::kClient ? kClientLabel : kServerLabel), client_hello,
      server_hello_head};
  return key.Compute(parts);
}

Session DeriveSession(const ClusterKey& key, Role role,
                      std::span<const uint8_t> client_hello,
                      std::span<const uint8_t> server_hello_head) {
  std::vector<uint8_t> salt(client_hello.begin(), client_hello.end());
  salt.insert(salt.end(), server_hello_head.begin(), server_hello_head.end());
  std::array<uint8_t, kSessionKeySize> c2s, s2c;
  key.Derive(salt, kClientToServer, c2s);
  key.Derive(salt, kServerToClient, s2c);
  Session s;
  s.send = FrameCipher(role == Role::kClient ? c2s : s2c);
  s.recv = FrameCipher(role == Role::kClient ? s2c : c2s);
  s.send.set_secure(key.secure_wire());
  s.recv.set_secure(key.secure_wire());
  OPENSSL_cleanse(c2s.data(), c2s.size());
  OPENSSL_cleanse(s2c.data(), s2c.size());
  return s;
}

}  // namespace stripefs::rpc

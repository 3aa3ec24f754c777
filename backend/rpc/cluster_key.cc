#include "backend/rpc/cluster_key.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stripefs::rpc {
namespace {

const char kKeyFix[] =
    "create one with `stripefs keygen FILE` and pass the same file to every "
    "server and client (--key)";

EVP_MAC* HmacAlgorithm() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

}  // namespace

Result<std::shared_ptr<const ClusterKey>> ClusterKey::Load(
    const std::string& path) {
  if (path.empty()) {
    return Status::InvalidArgument(std::string("no cluster key file given; ") +
                                   kKeyFix);
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status(err, "cannot open cluster key file '" + path +
                           "': " + std::strerror(err) + "; " + kKeyFix);
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument("cluster key file '" + path +
                                   "' is not a regular file; " + kKeyFix);
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o",
                  static_cast<unsigned>(st.st_mode & 07777));
    return Status(EPERM, "cluster key file '" + path + "' has mode " + mode +
                             ": group or others may read it; run `chmod 600 " +
                             path + "`");
  }
  uint8_t buf[kClusterKeySize + 1];
  size_t got = 0;
  while (got < sizeof(buf)) {
    ssize_t n = ::read(fd, buf + got, sizeof(buf) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return Status(err, "cannot read cluster key file '" + path +
                             "': " + std::strerror(err) + "; " + kKeyFix);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != kClusterKeySize) {
    return Status::InvalidArgument("cluster key file '" + path + "' holds " +
                                   (got > kClusterKeySize
                                        ? std::string("more than 32")
                                        : std::to_string(got)) +
                                   " bytes, expected exactly 32; " + kKeyFix);
  }
  auto key = std::make_shared<ClusterKey>();
  std::memcpy(key->bytes_.data(), buf, kClusterKeySize);
  OPENSSL_cleanse(buf, sizeof(buf));
  return std::shared_ptr<const ClusterKey>(std::move(key));
}

Status ClusterKey::Generate(const std::string& path) {
  uint8_t buf[kClusterKeySize];
  if (RAND_bytes(buf, sizeof(buf)) != 1) {
    return Status::IoError("OpenSSL RAND_bytes failed to make a cluster key");
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST) {
      return Status::Exists("cluster key file '" + path +
                            "' already exists; keeping it (delete it first "
                            "to make a new key)");
    }
    return Status(err, "cannot create cluster key file '" + path +
                           "': " + std::strerror(err));
  }
  size_t done = 0;
  while (done < sizeof(buf)) {
    ssize_t n = ::write(fd, buf + done, sizeof(buf) - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return Status(err, "cannot write cluster key file '" + path +
                             "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  OPENSSL_cleanse(buf, sizeof(buf));
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return Status(err, "cannot sync cluster key file '" + path +
                           "': " + std::strerror(err));
  }
  return Status::Ok();
}

std::shared_ptr<const ClusterKey> ClusterKey::FromBytes(
    std::span<const uint8_t, kClusterKeySize> bytes) {
  auto key = std::make_shared<ClusterKey>();
  std::memcpy(key->bytes_.data(), bytes.data(), kClusterKeySize);
  return key;
}

std::shared_ptr<const ClusterKey> ClusterKey::WithSecureWire(
    bool secure) const {
  auto key = std::make_shared<ClusterKey>(*this);
  key->secure_wire_ = secure;
  return key;
}

Mac ClusterKey::Compute(std::span<const std::span<const uint8_t>> parts) const {
  Mac out{};
  EVP_MAC* alg = HmacAlgorithm();
  EVP_MAC_CTX* ctx = alg ? EVP_MAC_CTX_new(alg) : nullptr;
  if (ctx == nullptr) std::abort();  // OpenSSL without HMAC: unusable build
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end()};
  size_t len = 0;
  bool ok = EVP_MAC_init(ctx, bytes_.data(), bytes_.size(), params) == 1;
  for (auto p : parts) {
    if (ok && !p.empty()) ok = EVP_MAC_update(ctx, p.data(), p.size()) == 1;
  }
  if (ok) ok = EVP_MAC_final(ctx, out.data(), &len, out.size()) == 1;
  EVP_MAC_CTX_free(ctx);
  if (!ok || len != kMacSize) std::abort();  // cannot happen with SHA256
  return out;
}

void ClusterKey::Derive(std::span<const uint8_t> salt, std::string_view info,
                        std::span<uint8_t> out) const {
  static EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf ? EVP_KDF_CTX_new(kdf) : nullptr;
  if (ctx == nullptr) std::abort();  // OpenSSL without HKDF: unusable build
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                        const_cast<uint8_t*>(bytes_.data()),
                                        bytes_.size()),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()), salt.size()),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size()),
      OSSL_PARAM_construct_end()};
  bool ok = EVP_KDF_derive(ctx, out.data(), out.size(), params) == 1;
  EVP_KDF_CTX_free(ctx);
  if (!ok) std::abort();  // cannot happen for sizes we use
}

bool MacEqual(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace stripefs::rpc

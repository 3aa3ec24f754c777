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
#include <fstream>
#include <sstream>

namespace stripefs::rpc {
namespace {

const char kKeyFix[] =
    "create one with `stripefs keygen FILE` and pass the same file to every "
    "server and client (--key)";

constexpr std::string_view kIdentityHeader = "# stripefs identity";
constexpr std::string_view kIdentityKeyLabel = "stripefs identity key";

std::string Hex(std::span<const uint8_t> b) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s += d[x >> 4];
    s += d[x & 15];
  }
  return s;
}

bool Unhex(std::string_view s, std::span<uint8_t> out) {
  if (s.size() != 2 * out.size()) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = nib(s[2 * i]), lo = nib(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

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
  if (got > kClusterKeySize ||
      (got == kClusterKeySize &&
       std::string_view(reinterpret_cast<char*>(buf), got)
           .starts_with(kIdentityHeader))) {
    OPENSSL_cleanse(buf, sizeof(buf));
    return LoadIdentity(path);
  }
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

Result<std::shared_ptr<const ClusterKey>> ClusterKey::LoadIdentity(
    const std::string& path) {
  const std::string fix =
      "identity files are written by `stripefs auth add client.NAME --out "
      "FILE`; the server key by `stripefs keygen FILE` (32 bytes)";
  std::ifstream in(path);
  std::string header, entity, salt_hex, key_hex, extra;
  std::getline(in, header);
  auto field = [&](const char* name, std::string* value) {
    std::string line;
    if (!std::getline(in, line) || !line.starts_with(name) ||
        line.size() <= std::strlen(name) + 1 || line[std::strlen(name)] != ' ')
      return false;
    *value = line.substr(std::strlen(name) + 1);
    return true;
  };
  auto key = std::make_shared<ClusterKey>();
  bool ok = header.starts_with(kIdentityHeader) && field("entity", &entity) &&
            field("salt", &salt_hex) && field("key", &key_hex) &&
            !(in >> extra) && Unhex(salt_hex, key->salt_) &&
            Unhex(key_hex, key->bytes_);
  OPENSSL_cleanse(key_hex.data(), key_hex.size());
  if (!ok) {
    return Status::InvalidArgument(
        "key file '" + path +
        "' is neither a 32-byte server key nor an identity file "
        "(lines: \"" +
        std::string(kIdentityHeader) +
        "\", \"entity NAME\", \"salt HEX\", "
        "\"key HEX\"); " +
        fix);
  }
  auto p = ParseEntity(entity);
  if (!p.ok() || *p == Principal::kServer) {
    return Status::InvalidArgument("key file '" + path + "': " +
                                   (p.ok() ? std::string("\"server\" is the "
                                                         "32-byte server key")
                                           : p.status().message()) +
                                   "; " + fix);
  }
  key->principal_ = *p;
  std::memcpy(key->name_.data(), entity.data(), entity.size());
  key->name_len_ = entity.size();
  return std::shared_ptr<const ClusterKey>(std::move(key));
}

ClusterKey ClusterKey::DeriveIdentity(std::string_view entity,
                                      const EntitySalt& salt) const {
  ClusterKey k;
  std::span<const uint8_t> parts[] = {
      {reinterpret_cast<const uint8_t*>(kIdentityKeyLabel.data()),
       kIdentityKeyLabel.size()},
      {reinterpret_cast<const uint8_t*>(entity.data()), entity.size()},
      salt};
  k.bytes_ = Compute(parts);
  size_t n = std::min(entity.size(), kEntityNameMax);
  std::memcpy(k.name_.data(), entity.data(), n);
  k.name_len_ = n;
  k.salt_ = salt;
  auto p = ParseEntity(entity);
  k.principal_ = p.ok() ? *p : Principal::kClient;
  // A secure server's connections with this identity are secure too.
  k.secure_wire_ = secure_wire_;
  return k;
}

Result<ClusterKey> ClusterKey::NewIdentity(std::string_view entity) const {
  if (principal_ != Principal::kServer)
    return Status(EPERM, "identities are derived from the server key, not " +
                             std::string(this->entity()) + "'s");
  STRIPEFS_ASSIGN_OR_RETURN(Principal p, ParseEntity(entity));
  if (p == Principal::kServer)
    return Status::InvalidArgument(
        "\"server\" is the server key itself; name the new identity "
        "client.NAME or admin.NAME");
  EntitySalt salt;
  if (RAND_bytes(salt.data(), static_cast<int>(salt.size())) != 1)
    return Status::IoError("OpenSSL RAND_bytes failed to make a salt");
  return DeriveIdentity(entity, salt);
}

namespace {
constexpr std::string_view kWrapLabel = "stripefs identity wrap ";
}  // namespace

std::vector<uint8_t> ClusterKey::WrapFor(const ClusterKey& recipient) const {
  std::array<uint8_t, kClusterKeySize> pad;
  recipient.Derive(salt_, std::string(kWrapLabel) + std::string(entity()), pad);
  std::vector<uint8_t> out(kClusterKeySize);
  for (size_t i = 0; i < kClusterKeySize; ++i) out[i] = bytes_[i] ^ pad[i];
  OPENSSL_cleanse(pad.data(), pad.size());
  return out;
}

Result<ClusterKey> ClusterKey::Unwrap(std::string_view entity,
                                      const EntitySalt& salt,
                                      std::span<const uint8_t> wrapped) const {
  STRIPEFS_ASSIGN_OR_RETURN(Principal p, ParseEntity(entity));
  if (wrapped.size() != kClusterKeySize || p == Principal::kServer)
    return Status(EPROTO, "metad returned a malformed identity key");
  std::array<uint8_t, kClusterKeySize> pad;
  Derive(salt, std::string(kWrapLabel) + std::string(entity), pad);
  ClusterKey k;
  for (size_t i = 0; i < kClusterKeySize; ++i)
    k.bytes_[i] = wrapped[i] ^ pad[i];
  OPENSSL_cleanse(pad.data(), pad.size());
  std::memcpy(k.name_.data(), entity.data(), entity.size());
  k.name_len_ = entity.size();
  k.salt_ = salt;
  k.principal_ = p;
  return k;
}

Status ClusterKey::SaveIdentity(const std::string& path) const {
  if (principal_ == Principal::kServer)
    return Status::InvalidArgument(
        "the server key is written by `stripefs keygen`, not as an identity");
  std::string text = std::string(kIdentityHeader) +
                     " (keep it private: mode 0600)\nentity " +
                     std::string(entity()) + "\nsalt " + Hex(salt_) + "\nkey " +
                     Hex(bytes_) + "\n";
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int err = errno;
    OPENSSL_cleanse(text.data(), text.size());
    return Status(
        err, "cannot create identity file '" + path +
                 "': " + std::strerror(err) +
                 (err == EEXIST ? " (remove it or pick another --out)" : ""));
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    done += static_cast<size_t>(n);
  }
  OPENSSL_cleanse(text.data(), text.size());
  bool ok = done == text.size() && ::fsync(fd) == 0;
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(path.c_str());
    return Status(err, "cannot write identity file '" + path +
                           "': " + std::strerror(err));
  }
  return Status::Ok();
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

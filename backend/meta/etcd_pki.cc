// EtcdPki over OpenSSL 3's libcrypto (X.509 building and signing).
#include "backend/meta/etcd_pki.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "common/unique_fd.h"

namespace stripefs {

namespace {

constexpr long kValidSeconds = 10L * 366 * 24 * 3600;

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;

Status CryptoError(const std::string& what) {
  return Status::IoError(what + " failed (OpenSSL)");
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Writes `data` to `path` with mode 0600 (via path.tmp, renamed).
Status WritePrivate(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return Status::FromErrno(errno, "create " + tmp);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno(errno, "write " + tmp);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return Status::FromErrno(errno, "fsync " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::FromErrno(errno, "rename " + tmp);
  return Status::Ok();
}

Result<std::string> ReadAll(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read " + path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1 << 20))
      return Status::InvalidArgument(path + " is over 1 MiB; not a PEM file");
  }
  return out;
}

Result<Key> NewKey() {
  Key k(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!k) return CryptoError("EC P-256 key generation");
  return k;
}

Result<std::string> KeyPem(EVP_PKEY* key) {
  std::unique_ptr<BIO, Free> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0,
                                       nullptr, nullptr) != 1)
    return CryptoError("PEM encoding of a key");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> CertPem(X509* cert) {
  std::unique_ptr<BIO, Free> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
    return CryptoError("PEM encoding of a certificate");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1)
    return CryptoError("certificate extension " + value);
  return Status::Ok();
}

// A certificate for `key` named `cn`, signed by `issuer_key` (self-signed
// when `issuer` is null).
Result<Cert> Build(EVP_PKEY* key, const std::string& cn, X509* issuer,
                   EVP_PKEY* issuer_key, bool ca,
                   const std::vector<std::string>& ips) {
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1)
    return CryptoError("X509_new");
  std::unique_ptr<BIGNUM, Free> serial(BN_new());
  if (!serial ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())))
    return CryptoError("certificate serial number");
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValidSeconds);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(
          name, "CN", MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) != 1)
    return CryptoError("certificate name " + cn);
  X509* signer = issuer ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1)
    return CryptoError("certificate issuer or key");
  if (ca) {
    STRIPEFS_RETURN_IF_ERROR(
        AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
    STRIPEFS_RETURN_IF_ERROR(AddExt(cert.get(), signer, NID_key_usage,
                                    "critical,keyCertSign,cRLSign"));
  } else {
    STRIPEFS_RETURN_IF_ERROR(
        AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    STRIPEFS_RETURN_IF_ERROR(
        AddExt(cert.get(), signer, NID_key_usage, "critical,digitalSignature"));
    STRIPEFS_RETURN_IF_ERROR(
        AddExt(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
    if (!ips.empty()) {
      std::string san;
      for (const std::string& ip : ips)
        san += (san.empty() ? "" : ",") + ("IP:" + ip);
      STRIPEFS_RETURN_IF_ERROR(
          AddExt(cert.get(), signer, NID_subject_alt_name, san));
    }
  }
  if (X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0)
    return CryptoError("signing certificate " + cn);
  return cert;
}

}  // namespace

Result<EtcdPki> EtcdPki::OpenOrCreate(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::FromErrno(errno, "create " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return Status::FromErrno(errno, "stat " + dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return Status(EPERM, dir +
                             " is not a directory of this user (a symlink or "
                             "someone else's?); remove it and try again");
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    return Status::FromErrno(errno, "chmod 700 " + dir);
  EtcdPki pki(dir);
  const std::string crt = dir + "/ca.crt", key = dir + "/ca.key";
  const bool have_crt = Exists(crt), have_key = Exists(key);
  if (have_crt != have_key)
    return Status::InvalidArgument("half a CA in " + dir + " (" +
                                   (have_crt ? key : crt) +
                                   " is missing); remove " + dir +
                                   " to make a new one (then every "
                                   "etcd certificate is new too)");
  if (have_crt) return pki;
  STRIPEFS_ASSIGN_OR_RETURN(Key k, NewKey());
  STRIPEFS_ASSIGN_OR_RETURN(
      Cert c, Build(k.get(), "stripefs etcd CA", nullptr, nullptr, true, {}));
  STRIPEFS_ASSIGN_OR_RETURN(std::string kp, KeyPem(k.get()));
  STRIPEFS_ASSIGN_OR_RETURN(std::string cp, CertPem(c.get()));
  STRIPEFS_RETURN_IF_ERROR(WritePrivate(key, kp));
  STRIPEFS_RETURN_IF_ERROR(WritePrivate(crt, cp));
  return pki;
}

Status EtcdPki::Issue(const std::string& name, const std::string& common_name,
                      const std::vector<std::string>& ip_addresses) const {
  const EtcdTlsFiles f = FilesFor(name);
  if (Exists(f.cert) && Exists(f.key)) return Status::Ok();
  STRIPEFS_ASSIGN_OR_RETURN(std::string ca_pem, ReadAll(f.ca));
  STRIPEFS_ASSIGN_OR_RETURN(std::string ca_key_pem, ReadAll(dir_ + "/ca.key"));
  std::unique_ptr<BIO, Free> cb(
      BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())));
  std::unique_ptr<BIO, Free> kb(
      BIO_new_mem_buf(ca_key_pem.data(), static_cast<int>(ca_key_pem.size())));
  Cert ca(cb ? PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr)
             : nullptr);
  Key ca_key(kb ? PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr)
                : nullptr);
  if (!ca || !ca_key)
    return Status::Corruption("the CA in " + dir_ +
                              " does not parse; remove the directory to make "
                              "a new one");
  STRIPEFS_ASSIGN_OR_RETURN(Key k, NewKey());
  STRIPEFS_ASSIGN_OR_RETURN(Cert c, Build(k.get(), common_name, ca.get(),
                                          ca_key.get(), false, ip_addresses));
  STRIPEFS_ASSIGN_OR_RETURN(std::string kp, KeyPem(k.get()));
  STRIPEFS_ASSIGN_OR_RETURN(std::string cp, CertPem(c.get()));
  STRIPEFS_RETURN_IF_ERROR(WritePrivate(f.key, kp));
  return WritePrivate(f.cert, cp);
}

}  // namespace stripefs

// EtcdPki: a small certificate authority for an etcd cluster that holds
// stripefs volumes, so `stripefs cluster up --meta-engine etcd` and the
// etcd test fixture can run etcd with TLS and client-certificate auth
// without an operator's PKI. An operator with their own CA uses that
// instead (docs/metadata.md, "etcd security").
//
// Files, all under one directory D (created 0700, every file 0600, written
// to a temporary name and renamed, never through a symlink):
//   D/ca.crt  D/ca.key          the CA (EC P-256, ten years)
//   D/NAME.crt D/NAME.key       a certificate signed by it
// A certificate's Common Name is the etcd user it authenticates (etcd with
// --client-cert-auth), or for members the peer name etcd checks with
// --peer-cert-allowed-cn. Whoever can read ca.key can mint any user,
// root included: it stays in D, readable by the cluster's owner only.
//
// Not thread-safe for one directory (one owner: `cluster up`, a fixture).
#pragma once

#include <string>
#include <vector>

#include "backend/meta/etcd_kv.h"
#include "common/status.h"

namespace stripefs {

class EtcdPki {
 public:
  // Opens the CA in `dir`, making the directory and a new CA when there is
  // none yet (a CA with only one of its two files is an error naming it).
  static Result<EtcdPki> OpenOrCreate(const std::string& dir);

  // Makes D/name.{crt,key}, a certificate with Common Name `common_name`
  // for both TLS client and server use; a server certificate names its
  // addresses in `ip_addresses` (IPv4/IPv6 literals). Keeps an existing
  // pair (a restart reuses the member and user certificates).
  Status Issue(const std::string& name, const std::string& common_name,
               const std::vector<std::string>& ip_addresses = {}) const;

  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return dir_ + "/ca.crt"; }
  // ca, cert and key of certificate `name`.
  EtcdTlsFiles FilesFor(const std::string& name) const {
    return {ca_file(), dir_ + "/" + name + ".crt", dir_ + "/" + name + ".key"};
  }

 private:
  explicit EtcdPki(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace stripefs

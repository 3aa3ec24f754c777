// EtcdProcess: a throwaway etcd cluster (Debian's /usr/bin/etcd) on loopback
// ports, data in a directory the caller owns, for tests of the etcd
// metadata engine. It runs as production should: TLS on client and peer
// ports with client-certificate auth, etcd authentication on (a root user),
// and every location NewLocation hands out has a user of its own whose role
// reaches only its prefix (certificates from an EtcdPki in DIR/pki). Each
// member is a child process that dies with the test (PR_SET_PDEATHSIG) and is
// SIGKILLed and reaped by the destructor.
//
// Start returns ENOENT when no etcd binary is installed, EOPNOTSUPP when the
// etcd engine is not built. Tests skip only on EtcdBinariesMissing() (a
// machine fact scripts/ctest_report.py checks) and fail on anything else.
// Not thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/meta/etcd_admin.h"
#include "backend/meta/etcd_pki.h"
#include "common/status.h"

namespace stripefs::testing {

// "" when /usr/bin/etcd and /usr/bin/etcdctl are installed, else which is
// missing (the skip message of the etcd tests).
std::string EtcdBinariesMissing();

class EtcdProcess {
 public:
  // Starts `members` members with data under `dir` and waits (bounded) until
  // they answer.
  static Result<std::unique_ptr<EtcdProcess>> Start(const std::string& dir,
                                                    int members = 1);
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // "host:port,host:port,..." of the client URLs.
  std::string endpoints() const;
  // An etcds:// MetaStore location under a prefix unique to this call
  // ("NAME-PID-N"), with a user of that name and a certificate for it.
  Result<std::string> NewLocation(const std::string& name);
  pid_t pid(int member) const { return members_.at(member).pid; }
  // The CA and certificates (root's is "root"; members' "member").
  const EtcdPki& pki() const { return *pki_; }
  // The administrator (root) of this etcd.
  EtcdAdminTarget root() const;

 private:
  struct Member {
    std::string client;  // host:port
    pid_t pid = -1;
  };
  EtcdProcess() = default;
  std::vector<Member> members_;
  std::unique_ptr<EtcdPki> pki_;
  int locations_ = 0;
};

// One etcd (single member, loopback) shared by every test of the calling
// process, started on first use in a temporary directory and stopped at
// exit. The failure status is kept too (tests skip with it).
Result<EtcdProcess*> SharedEtcd();
// SharedEtcd()->NewLocation(name), or why there is no etcd (skip with it;
// a failure to make the user is an error, not a skip: see IsEtcdSkip).
Result<std::string> SharedEtcdLocation(const std::string& name);
// True for the statuses SharedEtcd returns when etcd is not installed or
// the engine is not built (ENOENT, EOPNOTSUPP): skip; anything else fails.
bool IsEtcdSkip(const Status& s);

}  // namespace stripefs::testing

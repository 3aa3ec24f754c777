// Administration of an etcd cluster that holds stripefs volumes: turning on
// etcd's authentication with a root user, giving a volume a user whose role
// may read and write its key prefix and nothing else, and a member's Raft
// status (for `stripefs cluster status`). Used by `stripefs cluster up
// --meta-engine etcd` and the etcd test fixture; an operator running their
// own etcd does the same with etcdctl (docs/metadata.md, "etcd security").
//
// Identity: every call is made over TLS with a client certificate, and etcd
// (run with --client-cert-auth) takes the certificate's Common Name as the
// user. The admin calls need a certificate named "root"; users made here
// have no password and are reached only through certificates the cluster's
// CA signed with their name. Plaintext targets are refused (EINVAL).
//
// Each call tries the endpoints in turn until one answers or `timeout`
// passes (ETIMEDOUT naming the last error). Built only with the etcd engine
// (ENOTSUP otherwise, as ConnectEtcd). Stateless; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/meta/etcd_kv.h"
#include "common/status.h"

namespace stripefs {

struct EtcdAdminTarget {
  std::vector<std::string> endpoints;  // host:port, at least one
  EtcdTlsFiles tls;                    // client certificate: CN "root"
  std::chrono::milliseconds timeout{10000};
};

// The user etcd requires before authentication can be turned on.
inline constexpr std::string_view kEtcdRootUser = "root";

// Creates the root user (no password) with the root role and enables
// authentication. Idempotent (an enabled cluster stays as it is).
Status EtcdEnableAuth(const EtcdAdminTarget& root);

// Creates role `user` with readwrite on every key starting with `prefix`
// (and nothing else), and user `user` without a password holding it.
// Idempotent. `prefix` is a volume's key prefix (EtcdLocation::prefix).
Status EtcdGrantPrefix(const EtcdAdminTarget& root, const std::string& user,
                       const std::string& prefix);

// One member's view of Raft (etcd's Maintenance.Status).
struct EtcdMemberState {
  uint64_t member_id = 0;
  bool leader = false;  // this member is the leader
  uint64_t raft_term = 0;
  std::string version;  // etcd's version
};
// The status of the member at `endpoint` alone (no failover), within
// `timeout`. Any certificate the members trust may ask.
Result<EtcdMemberState> EtcdMemberStatus(const std::string& endpoint,
                                         const EtcdTlsFiles& tls,
                                         std::chrono::milliseconds timeout);

// [prefix, end) holds exactly the keys starting with `prefix` (etcd's
// range_end for a prefix: the last byte below 0xff incremented).
std::string EtcdPrefixEnd(const std::string& prefix);

}  // namespace stripefs

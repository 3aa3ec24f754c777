// The command line of one etcd member on loopback (TLS with client-
// certificate auth when the spec names certificates), built in one place for
// `stripefs cluster up --meta-engine etcd` (tools/cluster_etcd.cc) and the
// test fixture tests/support/etcd_process.cc, and the loopback port picker
// both use. Builds strings only: starting, signalling and reaping the
// process stays with the caller. Stateless; thread-safe.
//
// Raft timing is 2x etcd's defaults (heartbeat 200 ms, election 2 s): a
// loaded machine (CI, tests, a laptop cluster) must not elect a new leader on
// every scheduling hiccup.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace stripefs {

struct EtcdMemberSpec {
  std::string binary;           // argv[0]: the etcd executable
  std::string name;             // --name, as in initial_cluster
  std::string data_dir;         // --data-dir
  std::string client_url;       // http(s)://HOST:PORT (listen and advertise)
  std::string peer_url;         // http(s)://HOST:PORT (listen and advertise)
  std::string initial_cluster;  // NAME=PEER_URL[,NAME=PEER_URL...]
  std::string cluster_token;    // --initial-cluster-token
  // TLS (all set, with https:// URLs) or none (http://). The member serves
  // clients and peers with `cert`/`key`, trusts certificates `ca` signed,
  // requires a client certificate on both ports, and accepts as peers only
  // certificates whose Common Name is `peer_common_name`.
  std::string ca_file, cert_file, key_file, peer_common_name;
};

// argv of a member of a new cluster (--initial-cluster-state new; a restart
// with the same data dir keeps its Raft identity), logging at warn.
std::vector<std::string> EtcdMemberArgs(const EtcdMemberSpec& spec);

// "127.0.0.1:PORT" with a port the kernel picked a moment ago (a small race
// with other processes, as for every daemon started on port 0).
Result<std::string> FreeLoopbackAddress();

}  // namespace stripefs

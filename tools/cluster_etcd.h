// The etcd members of a local cluster (`stripefs cluster up --meta-engine
// etcd --etcd-members N`): where each member lives in the cluster
// directory, its command line, its certificates, the wait until the members
// serve, turning on etcd's authentication with a user for the volume, and
// the members' Raft roles for `cluster status`.
//
// Security: members serve clients and each other over TLS only, require a
// client certificate signed by the cluster's own CA (D/etcd-tls, made by
// EtcdPki), accept as peers only certificates named stripefs-etcd-peer, and
// run with authentication on: the volume's user (the Common Name of
// D/etcd-tls/volume-VOL.crt) holds a role with readwrite on the volume's
// prefix and nothing else; root (D/etcd-tls/root.crt) is used only here, to
// set this up and to wait for members. docs/metadata.md, "etcd security".
// Starting, signalling and stopping the processes stays with
// tools/cmd_cluster.cc (one Spawn/Stop for all daemons).
//
// Files, for member i in 1..N under the cluster directory D:
//   D/etcd.i/                data dir (--data-dir)
//   D/etcd.i.{pid,log}       as for the other daemons
//   D/etcd.i.addr            client HOST:PORT      } picked free at the first
//   D/etcd.i.peer            peer   HOST:PORT      } `up`, reused after
//   D/etcd.cluster           --initial-cluster       } (restart keeps Raft ids)
//   D/etcd-tls/              0700: ca.{crt,key}, etcd.i.{crt,key} (members),
//                            root.{crt,key}, volume-VOL.{crt,key} (0600)
// Ports are loopback ports the kernel picked a moment before (a small race
// with other processes, as for every cluster daemon started on port 0).
// Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/meta/etcd_kv.h"
#include "common/status.h"

namespace stripefs::tools {

// "" when an etcd binary is installed, else the one-line error naming the fix.
std::string EtcdMissing();

// Raft role of one member as etcd reports it (Maintenance.Status).
struct EtcdMemberStatus {
  uint32_t member = 0;  // 1..N
  std::string address;  // client HOST:PORT
  bool answered = false;
  bool leader = false;
  uint64_t raft_term = 0;
  std::string error;  // why it did not answer
};

class EtcdMembers {
 public:
  EtcdMembers(std::string dir, uint32_t count)
      : dir_(std::move(dir)), count_(count) {}

  uint32_t count() const { return count_; }
  static std::string Name(uint32_t member) {
    return "etcd." + std::to_string(member);
  }
  std::string Base(uint32_t member) const { return dir_ + "/" + Name(member); }

  // Picks ports for a new layout (none of the address files exist yet) and
  // writes them, or checks that an earlier layout is complete; makes the
  // CA and the certificates that are missing.
  Status Plan();
  // Turns on authentication (root user) and gives volume `volume` its user
  // and role, once every member serves (WaitServing). Idempotent.
  Status SetupAuth(const std::string& volume) const;
  // argv (argv[0] the etcd binary) of member `member`, after Plan().
  Result<std::vector<std::string>> Args(uint32_t member) const;

  // "h:p,h:p,..." of every member's client address.
  std::string Endpoints() const;
  // The MetaStore location of volume `volume` on these members: etcds://
  // with the volume user's certificate.
  std::string Location(const std::string& volume) const;
  // The volume user's TLS files (for status calls and tests).
  EtcdTlsFiles VolumeFiles(const std::string& volume) const;

  // Waits until a linearizable read through each member in `members` (every
  // member when empty) succeeds, i.e. it is in a cluster with a leader.
  // ETIMEDOUT after timeout_s with the logs to read.
  Status WaitServing(int timeout_s,
                     const std::vector<uint32_t>& members = {}) const;

  // Each member's role, from etcd's Maintenance.Status over TLS with the
  // certificate of `volume`'s user (bounded: 2 s per member). Members that
  // do not answer have answered == false.
  std::vector<EtcdMemberStatus> Describe(const std::string& volume) const;

 private:
  std::string ClientAddress(uint32_t member) const;
  std::string TlsDir() const { return dir_ + "/etcd-tls"; }
  // Makes the CA and the member and root certificates that are missing.
  Status Certificates() const;
  static std::string VolumeUser(const std::string& volume) {
    return "volume-" + volume;
  }
  std::string dir_;
  uint32_t count_;
};

}  // namespace stripefs::tools

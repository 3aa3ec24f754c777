// The etcd members of a local cluster (`stripefs cluster up --meta-engine
// etcd --etcd-members N`): where each member lives in the cluster
// directory, its command line, the wait until the members serve, and their
// Raft roles for `cluster status`. Starting, signalling and stopping the
// processes stays with tools/cmd_cluster.cc (one Spawn/Stop for all
// daemons).
//
// Files, for member i in 1..N under the cluster directory D:
//   D/etcd.i/                data dir (--data-dir)
//   D/etcd.i.{pid,log}       as for the other daemons
//   D/etcd.i.addr            client HOST:PORT      } picked free at the first
//   D/etcd.i.peer            peer   HOST:PORT      } `up`, reused after
//   D/etcd.cluster           --initial-cluster       } (restart keeps Raft ids)
// Ports are loopback ports the kernel picked a moment before (a small race
// with other processes, as for every cluster daemon started on port 0).
// Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace stripefs::tools {

// "" when an etcd binary is installed, else the one-line error naming the fix.
std::string EtcdMissing();

// Raft role of one member as etcd reports it (etcdctl endpoint status).
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
  // writes them, or checks that an earlier layout is complete.
  Status Plan();
  // argv (argv[0] the etcd binary) of member `member`, after Plan().
  Result<std::vector<std::string>> Args(uint32_t member) const;

  // "h:p,h:p,..." of every member's client address.
  std::string Endpoints() const;
  // The MetaStore location of volume `volume` on these members.
  std::string Location(const std::string& volume) const;

  // Waits until a linearizable read through each member in `members` (every
  // member when empty) succeeds, i.e. it is in a cluster with a leader.
  // ETIMEDOUT after timeout_s with the logs to read.
  Status WaitServing(int timeout_s,
                     const std::vector<uint32_t>& members = {}) const;

  // Each member's role, from `etcdctl endpoint status` (bounded: 2 s per
  // member). Members that do not answer have answered == false.
  std::vector<EtcdMemberStatus> Describe() const;

 private:
  std::string ClientAddress(uint32_t member) const;
  std::string dir_;
  uint32_t count_;
};

}  // namespace stripefs::tools

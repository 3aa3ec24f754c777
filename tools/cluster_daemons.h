// The daemons of a local cluster (`stripefs cluster`, tools/cmd_cluster.cc):
// its configuration file, and how each daemon is started, found, signalled
// and stopped. This is the process supervision; cmd_cluster.cc holds the
// subcommands that use it. The directory layout is described there.
//
// A daemon runs in its own session (setsid), output appended to D/NAME.log,
// its pid in D/NAME.pid and its address in D/NAME.addr (which a restart
// reuses). Nothing here is a long-lived supervisor: each `stripefs cluster`
// call reads the files, acts and exits.
//
// Thread-safety: none needed (one CLI call, one thread). Ownership: values.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "common/status.h"
#include "tools/cluster_etcd.h"
#include "tools/cluster_netns.h"

namespace stripefs::tools {

// D/cluster.conf (and D/etcd.location): what `cluster up` was given.
struct ClusterConf {
  uint32_t servers = 6;
  uint32_t k = 4, m = 2, cell_size = 256 * 1024;
  uint32_t base_port = 0;     // 0: every process picks a free port
  uint32_t netns = 0;         // 1: hosts as network namespaces (--netns)
  uint32_t etcd_members = 0;  // 0: metad on RocksDB (D/metad/)
  uint32_t metads = 1;        // with etcd: metad.1..metads
  uint32_t etcd_timeout_ms = 5000;
  uint32_t secure = 0;  // 1: daemons run with --secure (encrypted frames)
  // An etcd run elsewhere ("etcds://h:p[,h:p]/VOL?ca=&cert=&key=", or
  // etcd:// with etcd_insecure; in D/etcd.location): no members of our own.
  std::string etcd_location;
  uint32_t etcd_insecure = 0;  // 1: --etcd-insecure (plaintext, loopback)
  bool etcd() const { return etcd_members > 0 || !etcd_location.empty(); }
};

Status SaveConf(const std::string& dir, const ClusterConf& c);
// nullopt when D/cluster.conf does not exist.
std::optional<ClusterConf> LoadConf(const std::string& dir);

// The volume's key prefix in the cluster's own etcd.
inline constexpr const char* kEtcdVolume = "stripefs";

// One daemon of the cluster: "metad" (rocksdb), "metad.<i>" (etcd),
// "chunkd.<id>" or "etcd.<i>".
struct Daemon {
  enum class Kind { kMetad, kChunkd, kEtcd };
  std::string name;
  uint32_t id = 0;  // chunkd id, metad/etcd index (0: the rocksdb metad)
  Kind kind = Kind::kChunkd;
  // D/NAME: the prefix of its .pid, .addr, .metrics and .log files.
  std::string base(const std::string& dir) const { return dir + "/" + name; }
};

Daemon Metad();
Daemon MetadOnEtcd(uint32_t i);
Daemon Chunkd(uint32_t id);
Daemon Etcd(uint32_t i);

// True while `pid` exists and has not exited (zombies have exited).
bool Running(pid_t pid);
// True when `pid` is stopped by a signal (state T in /proc/PID/stat).
bool Stopped(pid_t pid);
// Pid from the pid file if that process is alive (and not a zombie) and
// is one of ours (a stripefs or etcd command line, not a reused pid).
std::optional<pid_t> AlivePid(const std::string& pid_file);

// A cluster directory and the daemons its configuration names.
struct ClusterDaemons {
  std::string dir;
  ClusterConf conf;
  std::optional<NetnsLayout> net;  // set when conf.netns

  std::string key_path() const { return dir + "/cluster.key"; }
  // Every metad, comma-separated (clients fail over between them).
  std::string meta_address() const;
  EtcdMembers etcd() const { return EtcdMembers(dir, conf.etcd_members); }
  // The volume's etcd location (without options).
  std::string etcd_location() const;
  std::vector<Daemon> metads() const;
  std::vector<Daemon> etcd_members() const;

  // Starts one daemon and, for metads and chunkds, waits up to timeout_s
  // until it wrote its address file (etcd members: see EtcdMembers).
  // Exists when it runs already; the log's last lines when it exits.
  Status Start(const Daemon& d, int timeout_s);
  // Sends `sig` (0: none, the process was signalled before); with wait,
  // waits up to grace_s and escalates to SIGKILL. NotFound when not running.
  Status Stop(const Daemon& d, int sig, bool wait, int grace_s);
  // D/metrics.addrs from the daemons' metrics address files.
  Status WriteMetricsAddrs() const;
  // Waits until metad lists every chunkd as up at its current address.
  Status WaitRegistered(const std::shared_ptr<const rpc::ClusterKey>& key,
                        int timeout_s) const;

 private:
  std::string ListenFor(const Daemon& d) const;
  Result<std::vector<std::string>> DaemonArgs(const Daemon& d,
                                              const std::string& listen,
                                              const std::string& metrics) const;
  Status WaitForAddress(const Daemon& d, pid_t pid, int timeout_s) const;
  Status WriteMetaAddrs() const;
  Status StartEtcd(const Daemon& d);
};

// The cluster in `dir`; NotFound naming the fix when there is none.
Result<ClusterDaemons> LoadCluster(const std::string& dir);

// SIGTERMs every daemon of `daemons` first, so they shut down in parallel
// (each takes a moment: flush, close the store), then waits for each.
// Returns how many were running.
int StopTogether(ClusterDaemons& c, const std::vector<Daemon>& daemons,
                 int grace_s);

}  // namespace stripefs::tools

// LocalCluster: a real local cluster for tests -- metad + N chunkd processes
// on loopback started with the real `stripefs cluster up` in a directory of
// its own, and the few things tests do with it: read metad's address and
// the key, run the CLI (output appended to one log, shown on failures),
// signal or restart a server, take the cluster down.
//
// Teardown always runs: the destructor calls Down() (`stripefs cluster
// down`, which continues stopped servers, SIGTERMs and after the grace
// SIGKILLs), then SIGKILLs any daemon whose pid file still names a live
// stripefs process, and removes the directory it created. Call Down()
// yourself to assert that nothing survived. Needs the stripefs binary
// (STRIPEFS_BINARY at build time): Start() fails with NotSupported and the
// reason otherwise (ClusterSkipReason()). Not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace stripefs::testing {

// "" when a local cluster can be started (the stripefs binary was built),
// else why not.
std::string ClusterSkipReason();
// As ClusterSkipReason, for an etcd-backed cluster (also needs Debian's etcd
// and etcdctl, and the etcd engine built).
std::string EtcdClusterSkipReason();

enum class MetaEngine { kRocksDb, kEtcd };

struct LocalClusterOptions {
  int servers = 7;  // chunkd processes, ids 1..servers
  // 0: the `cluster up` default (4+2).
  uint32_t k = 0, m = 0;
  uint32_t cell_size = 65536;
  // "" = a fresh /tmp/stripefs-cluster-XXXXXX, removed again on teardown;
  // else this directory (created if missing, left in place).
  std::string dir;
  int down_grace_s = 3;
  // kEtcd: `cluster up --meta-engine etcd --etcd-members E --metads M`; a
  // metad's etcd calls fail after etcd_timeout_ms without a quorum.
  MetaEngine engine = MetaEngine::kRocksDb;
  int etcd_members = 3;
  int metads = 2;
  int etcd_timeout_ms = 5000;
};

class LocalCluster {
 public:
  static Result<std::unique_ptr<LocalCluster>> Start(
      LocalClusterOptions o = {});
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  const std::string& dir() const { return dir_; }
  // Every metad, comma-separated (the --meta a client fails over along).
  const std::string& meta_address() const { return meta_; }
  // One metad's address (index 1..metads with etcd; 1 = the only one else).
  std::string metad_address(int index) const;
  // The name `cluster kill/start --server` takes for metad `index`.
  std::string metad_name(int index) const;
  std::string key_file() const { return dir_ + "/cluster.key"; }

  // Runs `stripefs ARGS` (Sh: a shell command), output appended to the log;
  // the exit code, -1 if it did not exit normally.
  int Cli(const std::string& args);
  int Sh(const std::string& command);
  // The CLI log (its last 3000 bytes), for failure messages.
  std::string Log() const;
  // The contents of DIR/rel ("" if missing).
  std::string ReadFile(const std::string& rel) const;

  // `cluster kill --signal SIG --server S` / `cluster start --server S`,
  // S "metad" or a chunkd id. Errors carry the log.
  Status Signal(const std::string& server, int sig);
  Status Signal(int chunkd, int sig) {
    return Signal(std::to_string(chunkd), sig);
  }
  Status StartServer(const std::string& server);
  Status StartServer(int chunkd) { return StartServer(std::to_string(chunkd)); }

  // etcd engine: the member (1..etcd_members) that is the Raft leader now
  // (`cluster status`), ENOENT if none answers as leader.
  Result<int> EtcdLeader();

  // `cluster down`; then SIGKILLs every daemon that survived it. An error
  // names the survivors (or the failed command). Idempotent.
  Status Down();

 private:
  LocalCluster() = default;
  Status CliOk(const std::string& args);

  LocalClusterOptions o_;
  std::string dir_, meta_;
  bool owns_dir_ = false;
  bool up_ = false;
};

}  // namespace stripefs::testing

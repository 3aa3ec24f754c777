#include "tools/cluster_etcd.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "backend/meta/etcd_command.h"
#include "backend/meta/etcd_kv.h"
#include "tools/cluster_files.h"

namespace stripefs::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kInstallFix =
    "install etcd-server and etcd-client (scripts/install-deps.sh)";

// `name` in $PATH (then /usr/bin), or "".
std::string FindProgram(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? std::string(path) + ":/usr/bin" : "/usr/bin";
  std::stringstream ss(dirs);
  std::string d;
  while (std::getline(ss, d, ':')) {
    if (d.empty()) continue;
    std::string p = d + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

Status WriteLine(const std::string& path, const std::string& line) {
  std::ofstream f(path, std::ios::trunc);
  f << line << "\n";
  if (!f) return Status::IoError("cannot write " + path);
  return Status::Ok();
}

// stdout of `command` (run by /bin/sh) and whether it exited 0.
bool Capture(const std::string& command, std::string* out) {
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return false;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int rc = ::pclose(p);
  return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

}  // namespace

std::string EtcdMissing() {
  if (FindProgram("etcd").empty())
    return std::string("etcd is not installed (no etcd in PATH); ") +
           kInstallFix;
  if (!EtcdEngineMissing().empty())
    return "this stripefs was built without the etcd engine (" +
           std::string(EtcdEngineMissing()) +
           "); install the build dependencies (scripts/install-deps.sh) and "
           "rebuild";
  return "";
}

std::string EtcdMembers::ClientAddress(uint32_t member) const {
  return ReadFirstLine(Base(member) + ".addr");
}

Status EtcdMembers::Plan() {
  uint32_t present = 0;
  for (uint32_t i = 1; i <= count_; ++i)
    present +=
        !ClientAddress(i).empty() && !ReadFirstLine(Base(i) + ".peer").empty();
  if (present == count_ && !ReadFirstLine(dir_ + "/etcd.cluster").empty())
    return Status::Ok();
  if (present != 0)
    return Status::InvalidArgument(
        "the etcd members in " + dir_ + " are incomplete (" +
        std::to_string(present) + " of " + std::to_string(count_) +
        " have addresses); keep the earlier --etcd-members or use a new --dir");
  std::string cluster;
  for (uint32_t i = 1; i <= count_; ++i) {
    STRIPEFS_ASSIGN_OR_RETURN(std::string client, FreeLoopbackAddress());
    STRIPEFS_ASSIGN_OR_RETURN(std::string peer, FreeLoopbackAddress());
    STRIPEFS_RETURN_IF_ERROR(WriteLine(Base(i) + ".addr", client));
    STRIPEFS_RETURN_IF_ERROR(WriteLine(Base(i) + ".peer", peer));
    cluster += (i > 1 ? "," : "") + Name(i) + "=http://" + peer;
  }
  return WriteLine(dir_ + "/etcd.cluster", cluster);
}

Result<std::vector<std::string>> EtcdMembers::Args(uint32_t member) const {
  const std::string etcd = FindProgram("etcd");
  if (etcd.empty()) return Status::NotFound(EtcdMissing());
  const std::string client = "http://" + ClientAddress(member);
  const std::string peer = "http://" + ReadFirstLine(Base(member) + ".peer");
  const std::string cluster = ReadFirstLine(dir_ + "/etcd.cluster");
  if (client == "http://" || peer == "http://" || cluster.empty())
    return Status::NotFound("no addresses for " + Name(member) + " in " + dir_ +
                            "; start the cluster with `stripefs "
                            "cluster up --meta-engine etcd`");
  return EtcdMemberArgs({.binary = etcd,
                         .name = Name(member),
                         .data_dir = Base(member),
                         .client_url = client,
                         .peer_url = peer,
                         .initial_cluster = cluster,
                         .cluster_token = "stripefs-" + dir_});
}

std::string EtcdMembers::Endpoints() const {
  std::string out;
  for (uint32_t i = 1; i <= count_; ++i)
    out += (i > 1 ? "," : "") + ClientAddress(i);
  return out;
}

std::string EtcdMembers::Location(const std::string& volume) const {
  return std::string(kEtcdScheme) + Endpoints() + "/" + volume;
}

Status EtcdMembers::WaitServing(int timeout_s,
                                const std::vector<uint32_t>& members) const {
  std::vector<uint32_t> todo = members;
  if (todo.empty())
    for (uint32_t i = 1; i <= count_; ++i) todo.push_back(i);
  const auto until = Clock::now() + std::chrono::seconds(timeout_s);
  for (uint32_t m : todo) {
    EtcdLocation where;
    where.endpoints = {ClientAddress(m)};
    where.prefix = "stripefs-cluster-ready/";
    where.timeout = std::chrono::milliseconds(500);
    STRIPEFS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> kv, ConnectEtcd(where));
    // Any answer (the key is absent) means it serves linearizable reads.
    Status last = kv->Get("probe").status();
    while (!last.ok()) {
      if (Clock::now() >= until)
        return Status(ETIMEDOUT, Name(m) + " at " + ClientAddress(m) +
                                     " did not serve within " +
                                     std::to_string(timeout_s) + " s (" +
                                     last.ToString() + "); see " + Base(m) +
                                     ".log");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      last = kv->Get("probe").status();
    }
  }
  return Status::Ok();
}

std::vector<EtcdMemberStatus> EtcdMembers::Describe() const {
  std::vector<EtcdMemberStatus> out;
  const std::string etcdctl = FindProgram("etcdctl");
  for (uint32_t i = 1; i <= count_; ++i) {
    EtcdMemberStatus s;
    s.member = i;
    s.address = ClientAddress(i);
    std::string json;
    if (etcdctl.empty()) {
      s.error = std::string("etcdctl not installed; ") + kInstallFix;
    } else if (!Capture("ETCDCTL_API=3 " + etcdctl +
                            " --endpoints=" + s.address +
                            " --dial-timeout=1s --command-timeout=2s "
                            "endpoint status -w json 2>/dev/null",
                        &json)) {
      s.error = "no answer";
    } else {
      auto j = nlohmann::json::parse(json, nullptr, false);
      if (!j.is_array() || j.empty() || !j[0].contains("Status")) {
        s.error = "unexpected etcdctl output";
      } else {
        const auto& st = j[0]["Status"];
        const uint64_t me = st["header"].value("member_id", uint64_t{0});
        s.answered = true;
        s.leader = me != 0 && st.value("leader", uint64_t{0}) == me;
        s.raft_term = st.value("raftTerm", uint64_t{0});
      }
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace stripefs::tools

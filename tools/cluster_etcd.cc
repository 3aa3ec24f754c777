#include "tools/cluster_etcd.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend/meta/etcd_admin.h"
#include "backend/meta/etcd_command.h"
#include "backend/meta/etcd_kv.h"
#include "backend/meta/etcd_pki.h"
#include "tools/cluster_files.h"

namespace stripefs::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kInstallFix =
    "install etcd-server and etcd-client (scripts/install-deps.sh)";
// The Common Name every member's certificate has, and the only one a
// member accepts from a peer.
constexpr const char* kPeerName = "stripefs-etcd-peer";

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
  const std::string old_cluster = ReadFirstLine(dir_ + "/etcd.cluster");
  if (old_cluster.find("http://") != std::string::npos)
    return Status::InvalidArgument(
        "the etcd members in " + dir_ +
        " were made without TLS (by an older stripefs); `stripefs cluster "
        "down --dir " +
        dir_ + "` and use a new --dir");
  if (present == count_ && !old_cluster.empty()) return Certificates();
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
    cluster += (i > 1 ? "," : "") + Name(i) + "=https://" + peer;
  }
  STRIPEFS_RETURN_IF_ERROR(WriteLine(dir_ + "/etcd.cluster", cluster));
  return Certificates();
}

Status EtcdMembers::Certificates() const {
  STRIPEFS_ASSIGN_OR_RETURN(EtcdPki pki, EtcdPki::OpenOrCreate(TlsDir()));
  for (uint32_t i = 1; i <= count_; ++i) {
    // Members listen on loopback: the address is the host name clients check.
    const std::string client = ClientAddress(i);
    STRIPEFS_RETURN_IF_ERROR(
        pki.Issue(Name(i), kPeerName, {client.substr(0, client.rfind(':'))}));
  }
  return pki.Issue("root", std::string(kEtcdRootUser));
}

Status EtcdMembers::SetupAuth(const std::string& volume) const {
  STRIPEFS_ASSIGN_OR_RETURN(EtcdPki pki, EtcdPki::OpenOrCreate(TlsDir()));
  STRIPEFS_RETURN_IF_ERROR(pki.Issue(VolumeUser(volume), VolumeUser(volume)));
  EtcdAdminTarget root;
  for (uint32_t i = 1; i <= count_; ++i)
    root.endpoints.push_back(ClientAddress(i));
  root.tls = pki.FilesFor("root");
  STRIPEFS_RETURN_IF_ERROR(EtcdEnableAuth(root));
  return EtcdGrantPrefix(root, VolumeUser(volume), volume + "/");
}

EtcdTlsFiles EtcdMembers::VolumeFiles(const std::string& volume) const {
  return {TlsDir() + "/ca.crt", TlsDir() + "/" + VolumeUser(volume) + ".crt",
          TlsDir() + "/" + VolumeUser(volume) + ".key"};
}

Result<std::vector<std::string>> EtcdMembers::Args(uint32_t member) const {
  const std::string etcd = FindProgram("etcd");
  if (etcd.empty()) return Status::NotFound(EtcdMissing());
  const std::string client = "https://" + ClientAddress(member);
  const std::string peer = "https://" + ReadFirstLine(Base(member) + ".peer");
  const std::string cluster = ReadFirstLine(dir_ + "/etcd.cluster");
  if (client == "https://" || peer == "https://" || cluster.empty())
    return Status::NotFound("no addresses for " + Name(member) + " in " + dir_ +
                            "; start the cluster with `stripefs "
                            "cluster up --meta-engine etcd`");
  return EtcdMemberArgs({.binary = etcd,
                         .name = Name(member),
                         .data_dir = Base(member),
                         .client_url = client,
                         .peer_url = peer,
                         .initial_cluster = cluster,
                         .cluster_token = "stripefs-" + dir_,
                         .ca_file = TlsDir() + "/ca.crt",
                         .cert_file = TlsDir() + "/" + Name(member) + ".crt",
                         .key_file = TlsDir() + "/" + Name(member) + ".key",
                         .peer_common_name = kPeerName});
}

std::string EtcdMembers::Endpoints() const {
  std::string out;
  for (uint32_t i = 1; i <= count_; ++i)
    out += (i > 1 ? "," : "") + ClientAddress(i);
  return out;
}

std::string EtcdMembers::Location(const std::string& volume) const {
  const EtcdTlsFiles f = VolumeFiles(volume);
  return std::string(kEtcdTlsScheme) + Endpoints() + "/" + volume +
         "?ca=" + f.ca + "&cert=" + f.cert + "&key=" + f.key;
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
    where.tls = EtcdTlsFiles{TlsDir() + "/ca.crt", TlsDir() + "/root.crt",
                             TlsDir() + "/root.key"};
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

std::vector<EtcdMemberStatus> EtcdMembers::Describe(
    const std::string& volume) const {
  std::vector<EtcdMemberStatus> out;
  for (uint32_t i = 1; i <= count_; ++i) {
    EtcdMemberStatus s;
    s.member = i;
    s.address = ClientAddress(i);
    auto st = ::stripefs::EtcdMemberStatus(s.address, VolumeFiles(volume),
                                           std::chrono::milliseconds(2000));
    if (!st.ok()) {
      s.error = st.status().message();
    } else {
      s.answered = true;
      s.leader = st->leader;
      s.raft_term = st->raft_term;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace stripefs::tools

#include "tests/support/etcd_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "backend/meta/etcd_command.h"
#include "backend/meta/etcd_kv.h"

namespace stripefs::testing {

namespace {

constexpr const char* kEtcdBinary = "/usr/bin/etcd";
constexpr const char* kPeerName = "stripefs-test-etcd-peer";
constexpr const char* kEtcdctlBinary = "/usr/bin/etcdctl";

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  std::vector<char*> argv;
  for (const std::string& s : args)
    argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

}  // namespace

std::string EtcdBinariesMissing() {
  for (const char* bin : {kEtcdBinary, kEtcdctlBinary}) {
    if (::access(bin, X_OK) != 0)
      return std::string(bin) +
             " is not installed (scripts/install-deps.sh installs "
             "etcd-server and etcd-client)";
  }
  return "";
}

Result<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(const std::string& dir,
                                                        int members) {
  if (!EtcdEngineMissing().empty()) {
    return Status::NotSupported("etcd engine not built: " +
                                std::string(EtcdEngineMissing()));
  }
  if (std::string why = EtcdBinariesMissing(); !why.empty())
    return Status::NotFound(why);
  std::unique_ptr<EtcdProcess> p(new EtcdProcess());
  STRIPEFS_ASSIGN_OR_RETURN(EtcdPki pki, EtcdPki::OpenOrCreate(dir + "/pki"));
  p->pki_ = std::make_unique<EtcdPki>(pki);
  STRIPEFS_RETURN_IF_ERROR(pki.Issue("member", kPeerName, {"127.0.0.1"}));
  STRIPEFS_RETURN_IF_ERROR(pki.Issue("root", std::string(kEtcdRootUser)));
  const EtcdTlsFiles member = pki.FilesFor("member");
  std::vector<std::string> peers;
  std::string cluster;
  for (int i = 0; i < members; ++i) {
    STRIPEFS_ASSIGN_OR_RETURN(std::string client, FreeLoopbackAddress());
    STRIPEFS_ASSIGN_OR_RETURN(std::string peer, FreeLoopbackAddress());
    p->members_.push_back({client, -1});
    peers.push_back("https://" + peer);
    cluster += (i ? "," : "") + std::string("m") + std::to_string(i) + "=" +
               peers.back();
  }
  for (int i = 0; i < members; ++i) {
    const std::string name = "m" + std::to_string(i);
    const std::string data = dir + "/" + name;
    std::filesystem::create_directories(data);
    p->members_[i].pid =
        Spawn(EtcdMemberArgs({.binary = kEtcdBinary,
                              .name = name,
                              .data_dir = data,
                              .client_url = "https://" + p->members_[i].client,
                              .peer_url = peers[i],
                              .initial_cluster = cluster,
                              .cluster_token = "stripefs-test",
                              .ca_file = member.ca,
                              .cert_file = member.cert,
                              .key_file = member.key,
                              .peer_common_name = kPeerName}),
              data + ".log");
    if (p->members_[i].pid < 0) return Status::FromErrno(errno, "fork etcd");
  }
  // Ready when a read through the engine succeeds (bounded wait); then
  // authentication goes on.
  EtcdLocation where;
  for (const Member& m : p->members_) where.endpoints.push_back(m.client);
  where.prefix = "stripefs-test-ready/";
  where.timeout = std::chrono::milliseconds(500);
  where.tls = pki.FilesFor("root");
  STRIPEFS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> kv, ConnectEtcd(where));
  for (int i = 0; i < 120; ++i) {
    if (kv->Get("probe").ok()) {
      STRIPEFS_RETURN_IF_ERROR(EtcdEnableAuth(p->root()));
      return p;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return Status(ETIMEDOUT, "etcd in " + dir +
                               " is not healthy after 60 probes (see "
                               "health.log and the *.log files there)");
}

EtcdProcess::~EtcdProcess() {
  for (Member& m : members_) {
    if (m.pid > 0) kill(m.pid, SIGKILL);
  }
  for (Member& m : members_) {
    if (m.pid > 0) waitpid(m.pid, nullptr, 0);
  }
}

std::string EtcdProcess::endpoints() const {
  std::string out;
  for (const Member& m : members_) out += (out.empty() ? "" : ",") + m.client;
  return out;
}

EtcdAdminTarget EtcdProcess::root() const {
  EtcdAdminTarget t;
  for (const Member& m : members_) t.endpoints.push_back(m.client);
  t.tls = pki_->FilesFor("root");
  return t;
}

Result<std::string> EtcdProcess::NewLocation(const std::string& name) {
  const std::string volume = name + "-" + std::to_string(getpid()) + "-" +
                             std::to_string(++locations_);
  STRIPEFS_RETURN_IF_ERROR(pki_->Issue(volume, volume));
  STRIPEFS_RETURN_IF_ERROR(EtcdGrantPrefix(root(), volume, volume + "/"));
  const EtcdTlsFiles f = pki_->FilesFor(volume);
  return "etcds://" + endpoints() + "/" + volume + "?ca=" + f.ca +
         "&cert=" + f.cert + "&key=" + f.key;
}

namespace {

// The shared instance and the directory it lives in (removed at exit).
struct SharedEtcdHolder {
  std::string dir;
  Status status;
  std::unique_ptr<EtcdProcess> etcd;
  ~SharedEtcdHolder() {
    etcd.reset();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

Result<EtcdProcess*> SharedEtcd() {
  static SharedEtcdHolder* holder = [] {
    static SharedEtcdHolder h;
    std::string tmpl = "/tmp/stripefs-etcd-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      h.status = Status::FromErrno(errno, "mkdtemp");
      return &h;
    }
    h.dir = tmpl;
    auto e = EtcdProcess::Start(h.dir, 1);
    if (e.ok()) {
      h.etcd = std::move(e).value();
    } else {
      h.status = e.status();
    }
    return &h;
  }();
  if (!holder->etcd) return holder->status;
  return holder->etcd.get();
}

bool IsEtcdSkip(const Status& s) {
  return s.code() == ENOENT || s.code() == EOPNOTSUPP;
}

Result<std::string> SharedEtcdLocation(const std::string& name) {
  STRIPEFS_ASSIGN_OR_RETURN(EtcdProcess * etcd, SharedEtcd());
  return etcd->NewLocation(name);
}

}  // namespace stripefs::testing

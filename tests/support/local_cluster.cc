#include "tests/support/local_cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tests/support/run_command.h"

namespace stripefs::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// True if `pid` is a live (not zombie) daemon of the cluster in `dir` (its
// command line names the directory, so a reused pid is never killed).
bool AliveDaemonOf(long pid, const std::string& dir) {
  if (pid <= 1 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string stat = Slurp(proc + "/stat");
  const auto rp = stat.rfind(')');
  if (rp != std::string::npos && rp + 2 < stat.size() && stat[rp + 2] == 'Z')
    return false;
  return Slurp(proc + "/cmdline").find(dir + "/") != std::string::npos;
}

}  // namespace

std::string NetnsSkipReason() {
  if (::geteuid() != 0)
    return "needs root (CAP_NET_ADMIN) to create network namespaces";
  if (::access("/usr/sbin/ip", X_OK) != 0 && ::access("/sbin/ip", X_OK) != 0)
    return "needs iproute2's `ip` (apt-get install iproute2)";
  if (::access("/usr/sbin/tc", X_OK) != 0 && ::access("/sbin/tc", X_OK) != 0)
    return "needs iproute2's `tc` (apt-get install iproute2)";
  return ClusterSkipReason();
}

std::string EtcdClusterSkipReason() {
  std::string why = ClusterSkipReason();
  if (!why.empty()) return why;
  for (const char* bin : {"/usr/bin/etcd", "/usr/bin/etcdctl"}) {
    if (::access(bin, X_OK) != 0)
      return std::string(bin) +
             " is not installed (scripts/install-deps.sh installs "
             "etcd-server and etcd-client)";
  }
  return "";
}

std::string ClusterSkipReason() {
#ifdef STRIPEFS_BINARY
  if (::access(STRIPEFS_BINARY, X_OK) != 0)
    return std::string("the stripefs binary is missing: ") + STRIPEFS_BINARY;
  return "";
#else
  return "built without the stripefs binary (tools/ not configured)";
#endif
}

Result<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    LocalClusterOptions o) {
  if (const char* env = std::getenv("STRIPEFS_TEST_NETNS");
      env && std::string(env) == "1")
    o.netns = true;
  const std::string why = o.engine == MetaEngine::kEtcd
                              ? EtcdClusterSkipReason()
                          : o.netns ? NetnsSkipReason()
                                    : ClusterSkipReason();
  if (!why.empty()) return Status::NotSupported(why);
  std::unique_ptr<LocalCluster> c(new LocalCluster());
  c->o_ = o;
  if (o.dir.empty()) {
    char tmpl[] = "/tmp/stripefs-cluster-XXXXXX";
    if (!::mkdtemp(tmpl)) return Status::FromErrno(errno, "mkdtemp");
    c->dir_ = tmpl;
    c->owns_dir_ = true;
  } else {
    c->dir_ = o.dir;
    std::error_code ec;  // the CLI log lives there from the first command
    std::filesystem::create_directories(c->dir_, ec);
    if (ec) return Status::FromErrno(ec.value(), "mkdir " + c->dir_);
  }
  c->up_ = true;  // from here on teardown takes it down
  std::string args = "cluster up --servers " + std::to_string(o.servers);
  if (o.k != 0) args += " --k " + std::to_string(o.k);
  if (o.m != 0) args += " --m " + std::to_string(o.m);
  args += " --cell-size " + std::to_string(o.cell_size) + " --dir " + c->dir_;
  if (o.engine == MetaEngine::kEtcd) {
    args += " --meta-engine etcd --metads " + std::to_string(o.metads) +
            " --etcd-timeout-ms " + std::to_string(o.etcd_timeout_ms);
    args += o.etcd_location.empty()
                ? " --etcd-members " + std::to_string(o.etcd_members)
                : " --etcd '" + o.etcd_location + "'";  // has &
  }
  if (o.netns) args += " --netns";
  if (!o.link_rate.empty()) args += " --link-rate " + o.link_rate;
  Status up = c->CliOk(args);
  if (o.netns) {  // "layout TAG SUBNET SERVERS", also after a failed up
    std::istringstream state(Slurp(c->dir_ + "/netns.state"));
    std::string word;
    state >> word >> c->tag_;
  }
  STRIPEFS_RETURN_IF_ERROR(up);
  std::ifstream addr(c->dir_ + "/metad.addr");
  for (std::string line; std::getline(addr, line);)
    if (!line.empty()) c->meta_ += (c->meta_.empty() ? "" : ",") + line;
  if (c->meta_.empty())
    return Status::IoError("no " + c->dir_ + "/metad.addr after cluster up");
  return c;
}

LocalCluster::~LocalCluster() {
  Status st = Down();
  if (!st.ok()) std::fprintf(stderr, "teardown: %s\n", st.ToString().c_str());
  if (owns_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

int LocalCluster::Sh(const std::string& command) {
  const std::string cmd = command + " >>" + dir_ + "/test-cli.log 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int LocalCluster::Cli(const std::string& args) {
#ifdef STRIPEFS_BINARY
  return Sh(std::string(STRIPEFS_BINARY) + " " + args);
#else
  (void)args;
  return -1;
#endif
}

Status LocalCluster::CliOk(const std::string& args) {
  const int rc = Cli(args);
  if (rc == 0) return Status::Ok();
  return Status::IoError("stripefs " + args + " failed (exit " +
                         std::to_string(rc) + "):\n" + Log());
}

std::string LocalCluster::Log() const {
  std::string all = ReadFile("test-cli.log");
  return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
}

std::string LocalCluster::ReadFile(const std::string& rel) const {
  return Slurp(dir_ + "/" + rel);
}

Status LocalCluster::Signal(const std::string& server, int sig) {
  return CliOk("cluster kill --signal " + std::to_string(sig) + " --server " +
               server + " --dir " + dir_);
}

Status LocalCluster::StartServer(const std::string& server) {
  return CliOk("cluster start --server " + server + " --dir " + dir_);
}

Status LocalCluster::Partition(const std::string& server) {
  return CliOk("cluster partition --server " + server + " --dir " + dir_);
}

Status LocalCluster::Heal(const std::string& server) {
  return CliOk("cluster heal --server " + server + " --dir " + dir_);
}

std::string LocalCluster::NetworkLeftovers() const {
  if (tag_.empty()) return "";
  std::string left;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("sfs-" + tag_ + "-", 0) == 0) left += " netns " + name;
  }
  for (const auto& e :
       std::filesystem::directory_iterator("/sys/class/net", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("s" + tag_ + "-", 0) == 0) left += " link " + name;
  }
  return left;
}

std::string LocalCluster::metad_name(int index) const {
  return o_.engine == MetaEngine::kEtcd ? "metad." + std::to_string(index)
                                        : "metad";
}

std::string LocalCluster::metad_address(int index) const {
  std::string base = dir_ + "/" + metad_name(index);
  std::string a = Slurp(base + ".addr");
  while (!a.empty() && (a.back() == '\n' || a.back() == ' ')) a.pop_back();
  return a;
}

Result<int> LocalCluster::EtcdLeader() {
#ifdef STRIPEFS_BINARY
  CommandOutput st = RunCommand(std::string(STRIPEFS_BINARY) +
                                " cluster status --dir " + dir_);
  std::istringstream lines(st.out);
  for (std::string line; std::getline(lines, line);) {
    // "etcd.2     1234     127.0.0.1:4000         leader    3"
    std::istringstream w(line);
    std::string name, pid, addr, role;
    if (w >> name >> pid >> addr >> role && role == "leader" &&
        name.rfind("etcd.", 0) == 0)
      return std::atoi(name.c_str() + 5);
  }
  return Status::NotFound("no etcd member answers as leader:\n" + st.out);
#else
  return Status::NotSupported("no stripefs binary");
#endif
}

Status LocalCluster::Down() {
  if (!up_) return Status::Ok();
  up_ = false;
  Status st = CliOk("cluster down --grace " + std::to_string(o_.down_grace_s) +
                    " --dir " + dir_);
  std::string survivors;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    if (e.path().extension() != ".pid") continue;
    std::ifstream f(e.path());
    long pid = 0;
    if (f >> pid && AliveDaemonOf(pid, dir_)) {
      ::kill(static_cast<pid_t>(pid), SIGKILL);
      survivors +=
          " " + e.path().filename().string() + "=" + std::to_string(pid);
    }
  }
  if (!survivors.empty())
    return Status::IoError(
        "daemons survived `stripefs cluster down` (killed):" + survivors);
  if (std::string left = NetworkLeftovers(); !left.empty()) {
    // Remove them (so one failure does not leak into the host), then fail.
    (void)Sh("for n in $(ls /run/netns | grep '^sfs-" + tag_ +
             "-'); do ip netns del $n; done; ip link del s" + tag_ + "-cl");
    return Status::IoError("`stripefs cluster down` left" + left);
  }
  return st;
}

}  // namespace stripefs::testing

#include "tools/cluster_daemons.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend/rpc/remote_meta_service.h"
#include "tools/cluster_files.h"

namespace stripefs::tools {
namespace {

using Clock = std::chrono::steady_clock;

// In a namespace of its own every daemon has the same well-known ports.
constexpr int kNetnsRpcPort = 7000, kNetnsMetricsPort = 9100;

Status WriteText(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f) return Status::IoError("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::FromErrno(errno, "rename " + tmp);
  return Status::Ok();
}

// State letter of `pid` from /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or 0.
char ProcState(pid_t pid) {
  std::string stat = ReadFirstLine("/proc/" + std::to_string(pid) + "/stat");
  auto rp = stat.rfind(')');
  return rp != std::string::npos && rp + 2 < stat.size() ? stat[rp + 2] : 0;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "stripefs";
  buf[n] = 0;
  return buf;
}

// Starts `args` as a daemon in its own session, output appended to `log`,
// in network namespace `netns` unless that is "".
Result<pid_t> Spawn(const std::vector<std::string>& args,
                    const std::string& log, const std::string& netns) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "open log " + log);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "fork");
  }
  if (pid == 0) {
    ::setsid();
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::unsetenv("NOTIFY_SOCKET");  // our readiness is not the daemons'
    if (!netns.empty()) {
      if (int err = EnterNetns(netns.c_str()); err != 0) {
        std::fprintf(stderr, "enter network namespace %s: %s\n", netns.c_str(),
                     std::strerror(err));
        ::_exit(127);
      }
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

std::string LogTail(const std::string& log) {
  std::ifstream f(log);
  std::vector<std::string> lines;
  std::string l;
  while (std::getline(f, l)) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size();
       ++i)
    out += "    " + lines[i] + "\n";
  return out;
}

// Reaps `pid` if it is our child and has exited (so a zombie is not alive).
void ReapIfChild(pid_t pid) { ::waitpid(pid, nullptr, WNOHANG); }

}  // namespace

Status SaveConf(const std::string& dir, const ClusterConf& c) {
  std::ostringstream o;
  o << "servers " << c.servers << "\nk " << c.k << "\nm " << c.m
    << "\ncell_size " << c.cell_size << "\nbase_port " << c.base_port
    << "\nnetns " << c.netns << "\netcd_members " << c.etcd_members
    << "\nmetads " << c.metads << "\netcd_timeout_ms " << c.etcd_timeout_ms
    << "\netcd_insecure " << c.etcd_insecure << "\nsecure " << c.secure << "\n";
  if (!c.etcd_location.empty())
    STRIPEFS_RETURN_IF_ERROR(
        WriteText(dir + "/etcd.location", c.etcd_location + "\n"));
  return WriteText(dir + "/cluster.conf", o.str());
}

std::optional<ClusterConf> LoadConf(const std::string& dir) {
  std::ifstream f(dir + "/cluster.conf");
  if (!f) return std::nullopt;
  ClusterConf c;
  std::string name;
  uint64_t v;
  while (f >> name >> v) {
    if (name == "servers") c.servers = static_cast<uint32_t>(v);
    if (name == "k") c.k = static_cast<uint32_t>(v);
    if (name == "m") c.m = static_cast<uint32_t>(v);
    if (name == "cell_size") c.cell_size = static_cast<uint32_t>(v);
    if (name == "base_port") c.base_port = static_cast<uint32_t>(v);
    if (name == "netns") c.netns = static_cast<uint32_t>(v);
    if (name == "etcd_members") c.etcd_members = static_cast<uint32_t>(v);
    if (name == "metads") c.metads = static_cast<uint32_t>(v);
    if (name == "etcd_timeout_ms") c.etcd_timeout_ms = static_cast<uint32_t>(v);
    if (name == "etcd_insecure") c.etcd_insecure = static_cast<uint32_t>(v);
    if (name == "secure") c.secure = static_cast<uint32_t>(v);
  }
  c.etcd_location = ReadFirstLine(dir + "/etcd.location");
  return c;
}

Daemon Metad() { return {"metad", 0, Daemon::Kind::kMetad}; }
Daemon MetadOnEtcd(uint32_t i) {
  return {"metad." + std::to_string(i), i, Daemon::Kind::kMetad};
}

Daemon Chunkd(uint32_t id) { return {"chunkd." + std::to_string(id), id}; }
Daemon Etcd(uint32_t i) {
  return {EtcdMembers::Name(i), i, Daemon::Kind::kEtcd};
}

bool Running(pid_t pid) {
  if (pid <= 1 || ::kill(pid, 0) != 0) return false;
  char state = ProcState(pid);
  return state != 'Z' && state != 'X';
}

bool Stopped(pid_t pid) { return ProcState(pid) == 'T'; }

std::optional<pid_t> AlivePid(const std::string& pid_file) {
  std::string line = ReadFirstLine(pid_file);
  if (line.empty()) return std::nullopt;
  pid_t pid = static_cast<pid_t>(std::atol(line.c_str()));
  if (!Running(pid)) return std::nullopt;
  std::string cmd = ReadFirstLine("/proc/" + std::to_string(pid) + "/cmdline");
  if (cmd.find("stripefs") == std::string::npos &&
      cmd.find("etcd") == std::string::npos)
    return std::nullopt;  // reused pid
  return pid;
}

std::string ClusterDaemons::meta_address() const { return MetaAddresses(dir); }

std::string ClusterDaemons::etcd_location() const {
  return conf.etcd_members > 0 ? etcd().Location(kEtcdVolume)
                               : conf.etcd_location;
}

std::vector<Daemon> ClusterDaemons::metads() const {
  if (!conf.etcd()) return {Metad()};
  std::vector<Daemon> out;
  for (uint32_t i = 1; i <= conf.metads; ++i) out.push_back(MetadOnEtcd(i));
  return out;
}

std::vector<Daemon> ClusterDaemons::etcd_members() const {
  std::vector<Daemon> out;
  for (uint32_t i = 1; i <= conf.etcd_members; ++i) out.push_back(Etcd(i));
  return out;
}

std::string ClusterDaemons::ListenFor(const Daemon& p) const {
  if (net) return net->HostAddress(p.id) + ":" + std::to_string(kNetnsRpcPort);
  std::string prev = ReadFirstLine(p.base(dir) + ".addr");
  if (!prev.empty()) return prev;
  // With etcd, metad.1 takes the base port, the others free ones.
  if (conf.base_port == 0 || (p.kind == Daemon::Kind::kMetad && p.id > 1))
    return "127.0.0.1:0";
  const uint32_t offset = p.kind == Daemon::Kind::kMetad ? 0 : p.id;
  return "127.0.0.1:" + std::to_string(conf.base_port + offset);
}

// D/metad.addr from the etcd metads' address files (a rocksdb metad
// writes it itself).
Status ClusterDaemons::WriteMetaAddrs() const {
  std::string text;
  for (const Daemon& m : metads()) {
    std::string a = ReadFirstLine(m.base(dir) + ".addr");
    if (!a.empty()) text += a + "\n";
  }
  return WriteText(dir + "/metad.addr", text);
}

// Starts etcd member `p` (the caller waits for it: see EtcdMembers).
Status ClusterDaemons::StartEtcd(const Daemon& p) {
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> args, etcd().Args(p.id));
  STRIPEFS_ASSIGN_OR_RETURN(pid_t pid, Spawn(args, p.base(dir) + ".log", ""));
  return WriteText(p.base(dir) + ".pid", std::to_string(pid) + "\n");
}

Status ClusterDaemons::Stop(const Daemon& p, int sig, bool wait, int grace_s) {
  std::string pid_file = p.base(dir) + ".pid";
  auto pid = AlivePid(pid_file);
  if (!pid) {
    ::unlink(pid_file.c_str());
    return Status::NotFound(p.name + " is not running");
  }
  ::kill(*pid, sig);
  // A stopped (SIGSTOP) daemon only acts on SIGTERM once continued.
  if (sig == SIGTERM) ::kill(*pid, SIGCONT);
  if (!wait) return Status::Ok();
  // Wait for the process, not its pid file: a daemon removes the file
  // on its way out, before its threads, rings and memory are gone (and
  // its cmdline reads empty by then).
  auto until = Clock::now() + std::chrono::seconds(grace_s);
  while (Clock::now() < until) {
    ReapIfChild(*pid);
    if (!Running(*pid)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  bool killed = false;
  if (Running(*pid)) {
    ::kill(*pid, SIGKILL);
    killed = true;
    for (int i = 0; i < 250 && Running(*pid); ++i) {  // <= 5 s
      ReapIfChild(*pid);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ::unlink(pid_file.c_str());
  if (killed)
    std::fprintf(stderr, "cluster: %s ignored SIGTERM for %d s; killed\n",
                 p.name.c_str(), grace_s);
  return Status::Ok();
}

Status ClusterDaemons::WriteMetricsAddrs() const {
  std::string text;
  for (const Daemon& m : metads())
    text += ReadFirstLine(m.base(dir) + ".metrics") + "\n";
  for (uint32_t id = 1; id <= conf.servers; ++id)
    text += ReadFirstLine(Chunkd(id).base(dir) + ".metrics") + "\n";
  return WriteText(dir + "/metrics.addrs", text);
}

Status ClusterDaemons::WaitRegistered(
    const std::shared_ptr<const rpc::ClusterKey>& key, int timeout_s) const {
  rpc::RemoteMetaService meta(meta_address(), key);
  auto until = Clock::now() + std::chrono::seconds(timeout_s);
  std::string missing;
  while (Clock::now() < until) {
    auto map = meta.GetClusterMap();
    missing.clear();
    for (uint32_t id = 1; id <= conf.servers; ++id) {
      std::string addr = ReadFirstLine(Chunkd(id).base(dir) + ".addr");
      bool ok = false;
      if (map.ok()) {
        for (const auto& s : map->servers)
          ok |= s.id == id && s.address == addr && !addr.empty() &&
                s.state == ServerState::kUp;
      }
      if (!ok) {  // (two appends: GCC 12 -O3 warns falsely on " " + ...)
        missing += ' ';
        missing += std::to_string(id);
      }
    }
    if (missing.empty()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status(ETIMEDOUT, "chunkd" + missing + " did not register with metad");
}

Status ClusterDaemons::Start(const Daemon& d, int timeout_s) {
  if (auto pid = AlivePid(d.base(dir) + ".pid"))
    return Status::Exists(d.name + " already running (pid " +
                          std::to_string(*pid) + ")");
  if (d.kind == Daemon::Kind::kEtcd) return StartEtcd(d);
  const std::string base = d.base(dir);
  const std::string listen = ListenFor(d);
  // Metrics keep their port across restarts, like the RPC address.
  std::string metrics = ReadFirstLine(base + ".metrics");
  if (net)
    metrics = net->HostAddress(d.id) + ":" + std::to_string(kNetnsMetricsPort);
  if (metrics.empty()) metrics = "127.0.0.1:0";
  ::unlink((base + ".addr").c_str());
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> args,
                            DaemonArgs(d, listen, metrics));
  STRIPEFS_ASSIGN_OR_RETURN(
      pid_t pid, Spawn(args, base + ".log", net ? net->Namespace(d.id) : ""));
  STRIPEFS_RETURN_IF_ERROR(
      WriteText(base + ".pid", std::to_string(pid) + "\n"));
  STRIPEFS_RETURN_IF_ERROR(WaitForAddress(d, pid, timeout_s));
  return d.kind == Daemon::Kind::kMetad && conf.etcd() ? WriteMetaAddrs()
                                                       : Status::Ok();
}

// The command line of metad or chunkd `d`.
Result<std::vector<std::string>> ClusterDaemons::DaemonArgs(
    const Daemon& d, const std::string& listen,
    const std::string& metrics) const {
  const std::string base = d.base(dir);
  std::vector<std::string> args = {SelfExe()};
  if (d.kind == Daemon::Kind::kMetad) {
    const std::string loc = etcd_location();
    const std::string store =
        conf.etcd() ? loc + (loc.find('?') == std::string::npos ? "?" : "&") +
                          "timeout_ms=" + std::to_string(conf.etcd_timeout_ms)
                    : base;
    args.insert(args.end(),
                {"metad", "--dir", store, "--k", std::to_string(conf.k), "--m",
                 std::to_string(conf.m), "--cell-size",
                 std::to_string(conf.cell_size)});
    if (conf.etcd_insecure) args.push_back("--etcd-insecure");
  } else {
    std::string meta = meta_address();
    if (meta.empty())
      return Status::Unavailable("metad is not running (no " + dir +
                                 "/metad.addr); run `stripefs cluster start "
                                 "--dir " +
                                 dir + " --server " + metads()[0].name +
                                 "` first");
    args.insert(args.end(), {"chunkd", "--dir", base, "--id",
                             std::to_string(d.id), "--meta", meta});
  }
  args.insert(args.end(),
              {"--key", key_path(), "--listen", listen, "--pid-file",
               base + ".pid", "--address-file", base + ".addr", "--metrics",
               metrics, "--metrics-address-file", base + ".metrics"});
  if (conf.secure) args.push_back("--secure");
  return args;
}

// Waits (bounded) until daemon `d`, started as `pid`, wrote its address;
// the log's last lines when it exits or does not come up in time.
Status ClusterDaemons::WaitForAddress(const Daemon& d, pid_t pid,
                                      int timeout_s) const {
  const std::string base = d.base(dir);
  auto until = Clock::now() + std::chrono::seconds(timeout_s);
  while (Clock::now() < until) {
    if (!ReadFirstLine(base + ".addr").empty()) return Status::Ok();
    int st;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      ::unlink((base + ".pid").c_str());
      return Status::IoError(d.name + " exited during start; last lines of " +
                             base + ".log:\n" + LogTail(base + ".log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status(ETIMEDOUT, d.name + " did not come up within " +
                               std::to_string(timeout_s) + " s; see " + base +
                               ".log:\n" + LogTail(base + ".log"));
}

Result<ClusterDaemons> LoadCluster(const std::string& dir) {
  auto conf = LoadConf(dir);
  if (!conf)
    return Status::NotFound("no cluster in " + dir +
                            " (no cluster.conf); start "
                            "one with `stripefs cluster up --dir " +
                            dir + "`");
  ClusterDaemons c{dir, *conf, std::nullopt};
  if (conf->netns) {
    c.net = LoadNetnsLayout(dir);
    if (!c.net)
      return Status::NotFound("the --netns cluster in " + dir +
                              " has no network (no netns.state): `stripefs "
                              "cluster down --dir " +
                              dir + "`, then `cluster up --netns` again");
  }
  return c;
}

int StopTogether(ClusterDaemons& c, const std::vector<Daemon>& daemons,
                 int grace_s) {
  std::vector<bool> signalled(daemons.size(), false);
  for (size_t i = 0; i < daemons.size(); ++i)
    signalled[i] = c.Stop(daemons[i], SIGTERM, false, grace_s).ok();
  int stopped = 0;
  for (size_t i = 0; i < daemons.size(); ++i) {
    if (!signalled[i]) continue;
    (void)c.Stop(daemons[i], 0, true, grace_s);  // NotFound: already gone
    ++stopped;
  }
  return stopped;
}

}  // namespace stripefs::tools

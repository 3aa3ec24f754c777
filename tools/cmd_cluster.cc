// `stripefs cluster up|status|down|kill|start`: a local cluster of one metad
// and N chunkd processes on loopback, for tests, demos and benchmarks; with
// --meta-engine etcd, an etcd cluster of its own (tools/cluster_etcd.h) and
// several metads serving one volume in it.
//
// Everything lives under --dir D:
//   D/cluster.key            cluster key (made by `up` if absent)
//   D/cluster.conf           servers, geometry, base port, engine (by `up`)
//   D/metad/  D/metad.{pid,addr,metrics,log}                    rocksdb
//   D/metad.<i>.{pid,addr,metrics,log}   i in 1..M              etcd
//   D/metad.addr             every metad's address, one a line
//   D/etcd.<i>/ D/etcd.<i>.{pid,addr,peer,log}  D/etcd.cluster  etcd
//   D/etcd-tls/              etcd's CA and certificates (tools/cluster_etcd.h)
//   D/chunkd.<id>/  D/chunkd.<id>.{pid,addr,metrics,log}     ids 1..N
//   D/metrics.addrs          every daemon's Prometheus HOST:PORT, one a line
//                            (metad first), for scrape configs and tests
// Daemons run in their own session (setsid) with stdout/stderr appended to
// their log; `down` stops them with SIGTERM, then SIGKILL after a bounded
// wait. A restarted daemon reuses its previous address (D/*.addr).
// With --netns every daemon runs in a network namespace of its own
// (tools/cluster_netns.h, D/netns.state): `partition`/`heal` cut and restore
// one host's link, `down` removes the namespaces too.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/meta/etcd_kv.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/remote_meta_service.h"
#include "tools/cluster_etcd.h"
#include "tools/cluster_files.h"
#include "tools/cluster_netns.h"
#include "tools/command.h"
#include "tools/option_ranges.h"

namespace stripefs::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

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

// In a namespace of its own every daemon has the same well-known ports.
constexpr int kNetnsRpcPort = 7000, kNetnsMetricsPort = 9100;
// The volume's key prefix in the cluster's own etcd.
constexpr const char* kEtcdVolume = "stripefs";

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

Status SaveConf(const std::string& dir, const ClusterConf& c) {
  std::ostringstream o;
  o << "servers " << c.servers << "\nk " << c.k << "\nm " << c.m
    << "\ncell_size " << c.cell_size << "\nbase_port " << c.base_port
    << "\nnetns " << c.netns << "\netcd_members " << c.etcd_members
    << "\nmetads " << c.metads << "\netcd_timeout_ms " << c.etcd_timeout_ms
    << "\netcd_insecure " << c.etcd_insecure << "\nsecure " << c.secure
    << "\n";
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

// One daemon of the cluster: "metad" (rocksdb), "metad.<i>" (etcd),
// "chunkd.<id>" or "etcd.<i>".
struct Proc {
  enum class Kind { kMetad, kChunkd, kEtcd };
  std::string name;
  uint32_t id = 0;  // chunkd id, metad/etcd index (0: the rocksdb metad)
  Kind kind = Kind::kChunkd;
  std::string base(const std::string& dir) const { return dir + "/" + name; }
};

Proc Metad() { return {"metad", 0, Proc::Kind::kMetad}; }
Proc MetadOnEtcd(uint32_t i) {
  return {"metad." + std::to_string(i), i, Proc::Kind::kMetad};
}
Proc Chunkd(uint32_t id) { return {"chunkd." + std::to_string(id), id}; }
Proc Etcd(uint32_t i) { return {EtcdMembers::Name(i), i, Proc::Kind::kEtcd}; }

// State letter of `pid` from /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or 0.
char ProcState(pid_t pid) {
  std::string stat = ReadFirstLine("/proc/" + std::to_string(pid) + "/stat");
  auto rp = stat.rfind(')');
  return rp != std::string::npos && rp + 2 < stat.size() ? stat[rp + 2] : 0;
}

// True while `pid` exists and has not exited (zombies have exited).
bool Running(pid_t pid) {
  if (pid <= 1 || ::kill(pid, 0) != 0) return false;
  char state = ProcState(pid);
  return state != 'Z' && state != 'X';
}

// Pid from the pid file if that process is alive (and not a zombie).
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

// True when `pid` is stopped by a signal (state T in /proc/PID/stat).
bool Stopped(pid_t pid) { return ProcState(pid) == 'T'; }

// Reaps `pid` if it is our child and has exited (so a zombie is not alive).
void ReapIfChild(pid_t pid) { ::waitpid(pid, nullptr, WNOHANG); }

struct Cluster {
  std::string dir;
  ClusterConf conf;
  std::optional<NetnsLayout> net;  // set when conf.netns
  std::string key_path() const { return dir + "/cluster.key"; }
  // Every metad, comma-separated (clients fail over between them).
  std::string meta_address() const { return MetaAddresses(dir); }
  EtcdMembers etcd() const { return EtcdMembers(dir, conf.etcd_members); }
  // The volume's etcd location (without options).
  std::string etcd_location() const {
    return conf.etcd_members > 0 ? etcd().Location(kEtcdVolume)
                                 : conf.etcd_location;
  }
  std::vector<Proc> metads() const {
    if (!conf.etcd()) return {Metad()};
    std::vector<Proc> out;
    for (uint32_t i = 1; i <= conf.metads; ++i) out.push_back(MetadOnEtcd(i));
    return out;
  }
  std::vector<Proc> etcd_members() const {
    std::vector<Proc> out;
    for (uint32_t i = 1; i <= conf.etcd_members; ++i) out.push_back(Etcd(i));
    return out;
  }

  std::string ListenFor(const Proc& p) const {
    if (net)
      return net->HostAddress(p.id) + ":" + std::to_string(kNetnsRpcPort);
    std::string prev = ReadFirstLine(p.base(dir) + ".addr");
    if (!prev.empty()) return prev;
    // With etcd, metad.1 takes the base port, the others free ones.
    if (conf.base_port == 0 || (p.kind == Proc::Kind::kMetad && p.id > 1))
      return "127.0.0.1:0";
    const uint32_t offset = p.kind == Proc::Kind::kMetad ? 0 : p.id;
    return "127.0.0.1:" + std::to_string(conf.base_port + offset);
  }

  // D/metad.addr from the etcd metads' address files (a rocksdb metad
  // writes it itself).
  Status WriteMetaAddrs() const {
    std::string text;
    for (const Proc& m : metads()) {
      std::string a = ReadFirstLine(m.base(dir) + ".addr");
      if (!a.empty()) text += a + "\n";
    }
    return WriteText(dir + "/metad.addr", text);
  }

  // Starts etcd member `p` (the caller waits for it: see EtcdMembers).
  Status StartEtcd(const Proc& p) {
    STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> args, etcd().Args(p.id));
    STRIPEFS_ASSIGN_OR_RETURN(pid_t pid, Spawn(args, p.base(dir) + ".log", ""));
    return WriteText(p.base(dir) + ".pid", std::to_string(pid) + "\n");
  }

  // Starts one daemon and waits until it wrote its address file.
  Status Start(const Proc& p, int timeout_s) {
    if (auto pid = AlivePid(p.base(dir) + ".pid"))
      return Status::Exists(p.name + " already running (pid " +
                            std::to_string(*pid) + ")");
    if (p.kind == Proc::Kind::kEtcd) return StartEtcd(p);
    std::string base = p.base(dir);
    std::string listen = ListenFor(p);
    // Metrics keep their port across restarts, like the RPC address.
    std::string metrics = ReadFirstLine(base + ".metrics");
    if (net)
      metrics =
          net->HostAddress(p.id) + ":" + std::to_string(kNetnsMetricsPort);
    if (metrics.empty()) metrics = "127.0.0.1:0";
    ::unlink((base + ".addr").c_str());
    std::vector<std::string> args = {SelfExe()};
    if (p.kind == Proc::Kind::kMetad) {
      const std::string loc = etcd_location();
      const std::string store =
          conf.etcd() ? loc + (loc.find('?') == std::string::npos ? "?" : "&") +
                            "timeout_ms=" + std::to_string(conf.etcd_timeout_ms)
                      : base;
      args.insert(args.end(),
                  {"metad", "--dir", store, "--k", std::to_string(conf.k),
                   "--m", std::to_string(conf.m), "--cell-size",
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
                               std::to_string(p.id), "--meta", meta});
    }
    args.insert(args.end(),
                {"--key", key_path(), "--listen", listen, "--pid-file",
                 base + ".pid", "--address-file", base + ".addr", "--metrics",
                 metrics, "--metrics-address-file", base + ".metrics"});
    if (conf.secure) args.push_back("--secure");
    STRIPEFS_ASSIGN_OR_RETURN(
        pid_t pid, Spawn(args, base + ".log", net ? net->Namespace(p.id) : ""));
    STRIPEFS_RETURN_IF_ERROR(
        WriteText(base + ".pid", std::to_string(pid) + "\n"));
    auto until = Clock::now() + std::chrono::seconds(timeout_s);
    while (Clock::now() < until) {
      if (!ReadFirstLine(base + ".addr").empty())
        return p.kind == Proc::Kind::kMetad && conf.etcd() ? WriteMetaAddrs()
                                                           : Status::Ok();
      int st;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        ::unlink((base + ".pid").c_str());
        return Status::IoError(p.name + " exited during start; last lines of " +
                               base + ".log:\n" + LogTail(base + ".log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Status(ETIMEDOUT, p.name + " did not come up within " +
                                 std::to_string(timeout_s) + " s; see " + base +
                                 ".log:\n" + LogTail(base + ".log"));
  }

  // Sends `sig` (0: none, the process was signalled before); with wait,
  // waits (bounded) and escalates to SIGKILL.
  Status Stop(const Proc& p, int sig, bool wait, int grace_s) {
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

  // D/metrics.addrs from the daemons' metrics address files.
  Status WriteMetricsAddrs() const {
    std::string text;
    for (const Proc& m : metads())
      text += ReadFirstLine(m.base(dir) + ".metrics") + "\n";
    for (uint32_t id = 1; id <= conf.servers; ++id)
      text += ReadFirstLine(Chunkd(id).base(dir) + ".metrics") + "\n";
    return WriteText(dir + "/metrics.addrs", text);
  }

  // Waits until metad lists every chunkd as up at its current address.
  Status WaitRegistered(const std::shared_ptr<const rpc::ClusterKey>& key,
                        int timeout_s) {
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
    return Status(ETIMEDOUT,
                  "chunkd" + missing + " did not register with metad");
  }
};

Result<Cluster> LoadCluster(const std::string& dir) {
  auto conf = LoadConf(dir);
  if (!conf)
    return Status::NotFound("no cluster in " + dir +
                            " (no cluster.conf); start "
                            "one with `stripefs cluster up --dir " +
                            dir + "`");
  Cluster c{dir, *conf, std::nullopt};
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

int Fail(const Status& s) {
  std::fprintf(stderr, "stripefs cluster: %s\n", s.ToString().c_str());
  return 1;
}

// Parses --server: "metad"/"meta" (the first metad), "metad.I", "etcd.I"
// or a chunkd id in 1..N.
Result<Proc> ParseServer(const Cluster& c, const std::string& s) {
  if (s == "metad" || s == "meta") return c.metads()[0];
  for (const Proc& p : c.metads())
    if (s == p.name) return p;
  for (const Proc& p : c.etcd_members())
    if (s == p.name) return p;
  char* end = nullptr;
  unsigned long id = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end != 0 || id == 0 || id > c.conf.servers)
    return Status::InvalidArgument(
        "--server '" + s + "': expected metad" +
        (c.conf.etcd() ? ".1.." + std::to_string(c.conf.metads) : "") +
        (c.conf.etcd_members > 0
             ? ", etcd.1.." + std::to_string(c.conf.etcd_members)
             : "") +
        " or a chunkd id 1.." + std::to_string(c.conf.servers));
  return Chunkd(static_cast<uint32_t>(id));
}

struct UpFlags {
  std::string dir;
  ClusterConf conf;
  int timeout_s = 30;
  bool netns = false;
  NetnsOptions net;
  std::string meta_engine = "rocksdb";  // or "etcd"
  bool engine_given = false;            // --meta-engine/--etcd-members/--metads
  bool etcd_insecure = false;           // --etcd-insecure
  bool secure = false, insecure = false;  // --secure / --no-secure
};

// The engine flags into f->conf, checked against an earlier cluster in the
// same directory (`old`): its engine stays unless flags say otherwise, and
// a volume cannot move between engines.
Status ResolveEngine(UpFlags* f, const std::optional<ClusterConf>& old) {
  if (f->meta_engine != "rocksdb" && f->meta_engine != "etcd")
    return Status::InvalidArgument("--meta-engine '" + f->meta_engine +
                                   "': expected rocksdb or etcd");
  if (!f->engine_given && old) {
    f->conf.etcd_members = old->etcd_members;
    f->conf.metads = old->metads;
    f->conf.etcd_timeout_ms = old->etcd_timeout_ms;
    f->conf.etcd_location = old->etcd_location;
    f->conf.etcd_insecure = old->etcd_insecure;
  } else if (f->meta_engine == "rocksdb") {
    if (f->conf.metads != 1 || f->conf.etcd_members != 0 ||
        !f->conf.etcd_location.empty())
      return Status::InvalidArgument(
          "--metads/--etcd-members/--etcd need --meta-engine etcd (a RocksDB "
          "volume is served by one metad)");
  } else if (!f->conf.etcd_location.empty()) {
    if (f->conf.etcd_members != 0)
      return Status::InvalidArgument(
          "give either --etcd (an etcd run elsewhere) or --etcd-members "
          "(members of our own), not both");
    if (f->conf.etcd_location.find("timeout_ms=") != std::string::npos)
      return Status::InvalidArgument(
          "--etcd takes no timeout_ms=; give it as --etcd-timeout-ms");
    auto where = ParseEtcdLocation(f->conf.etcd_location);
    if (!where.ok()) return where.status().Annotate("--etcd");
    where->insecure_loopback_ok = f->conf.etcd_insecure != 0;
    STRIPEFS_RETURN_IF_ERROR(CheckEtcdSecurity(*where));
    if (where->tls) {  // daemons start elsewhere: absolute paths
      for (std::string* file :
           {&where->tls->ca, &where->tls->cert, &where->tls->key})
        *file = fs::absolute(*file).string();
      f->conf.etcd_location = FormatEtcdLocation(*where);
    }
  } else if (f->conf.etcd_members == 0) {
    f->conf.etcd_members = 3;
  }
  if (f->conf.etcd_insecure && f->conf.etcd_location.empty())
    return Status::InvalidArgument(
        "--etcd-insecure is for an etcd:// run elsewhere (--etcd); the "
        "cluster's own etcd members always use TLS");
  if (old && old->etcd() != f->conf.etcd())
    return Status::InvalidArgument("the cluster in " + f->dir +
                                   " keeps its metadata in " +
                                   (old->etcd() ? "etcd" : "rocksdb") +
                                   "; drop --meta-engine or use a new --dir");
  if (old && old->etcd() && old->etcd_members != f->conf.etcd_members)
    return Status::InvalidArgument(
        "the cluster in " + f->dir + " has " +
        std::to_string(old->etcd_members) +
        " etcd members; drop --etcd-members or use a new --dir");
  if (f->conf.etcd_members > 0) {
    std::string missing = EtcdMissing();
    if (!missing.empty()) return Status::NotFound(missing);
  }
  return Status::Ok();
}

// Starts the etcd members, waits until every one serves, and turns on
// authentication with the volume's user.
Status StartEtcdMembers(Cluster& c, int timeout_s) {
  EtcdMembers etcd = c.etcd();
  STRIPEFS_RETURN_IF_ERROR(etcd.Plan());
  for (const Proc& p : c.etcd_members())
    STRIPEFS_RETURN_IF_ERROR(c.Start(p, timeout_s));
  STRIPEFS_RETURN_IF_ERROR(etcd.WaitServing(timeout_s));
  return etcd.SetupAuth(kEtcdVolume);
}

int RunUp(UpFlags f, bool geometry_given, bool servers_given, bool port_given) {
  std::error_code ec;
  fs::create_directories(f.dir, ec);
  if (ec)
    return Fail(
        Status(ec.value(), "cannot create " + f.dir + ": " + ec.message()));
  f.dir = fs::absolute(f.dir).string();
  const std::optional<ClusterConf> old = LoadConf(f.dir);
  if (Status s = ResolveEngine(&f, old); !s.ok()) return Fail(s);
  if (f.netns && f.conf.etcd())
    return Fail(Status::InvalidArgument(
        "--netns runs the rocksdb engine only (etcd members and several "
        "metads have no namespaces of their own yet); drop --netns or "
        "--meta-engine etcd"));
  bool was_netns = false;
  if (old) {  // restart of an existing cluster
    was_netns = old->netns != 0;
    if (!geometry_given)
      f.conf.k = old->k, f.conf.m = old->m, f.conf.cell_size = old->cell_size;
    if (!servers_given) f.conf.servers = old->servers;
    if (!port_given) f.conf.base_port = old->base_port;
    f.conf.secure = old->secure;  // kept unless --secure/--no-secure
  }
  if (f.secure) f.conf.secure = 1;
  if (f.insecure) f.conf.secure = 0;
  if (f.conf.servers == 0 || f.conf.servers > 1000)
    return Fail(Status::InvalidArgument("--servers must be 1..1000"));
  f.conf.netns = f.netns ? 1 : 0;
  Cluster c{f.dir, f.conf, std::nullopt};
  for (const Proc& m : c.metads()) {
    if (auto pid = AlivePid(m.base(f.dir) + ".pid"))
      return Fail(Status::Exists(
          "a cluster is already running in " + f.dir + " (" + m.name + " pid " +
          std::to_string(*pid) + "); `stripefs cluster down --dir " + f.dir +
          "` first"));
  }
  if (!fs::exists(c.key_path())) {
    Status s = rpc::ClusterKey::Generate(c.key_path());
    if (!s.ok()) return Fail(s);
  }
  auto key = rpc::ClusterKey::Load(c.key_path());
  if (!key.ok()) return Fail(key.status());
  *key = (*key)->WithSecureWire(f.conf.secure != 0);
  if (Status s = SaveConf(f.dir, f.conf); !s.ok()) return Fail(s);

  // Made before the daemons, removed after them when `up` fails.
  std::unique_ptr<NetnsNetwork> network;
  if (f.netns) {
    auto n = NetnsNetwork::Build(f.dir, f.conf.servers, f.net);
    if (!n.ok()) return Fail(n.status());
    network = std::move(n).value();
    c.net = network->layout();
  } else if (Status st = TeardownNetns(f.dir); !st.ok()) {
    return Fail(st);  // leftovers of an earlier --netns run
  }
  if (was_netns != f.netns) {
    // Remembered addresses belong to the other network.
    for (uint32_t id = 0; id <= f.conf.servers; ++id) {
      Proc p = id == 0 ? Metad() : Chunkd(id);
      ::unlink((p.base(f.dir) + ".addr").c_str());
      ::unlink((p.base(f.dir) + ".metrics").c_str());
    }
  }
  auto teardown = [&] {
    for (uint32_t id = 1; id <= f.conf.servers; ++id)
      (void)c.Stop(Chunkd(id), SIGTERM, true, 5);
    for (const Proc& m : c.metads()) (void)c.Stop(m, SIGTERM, true, 5);
    for (const Proc& e : c.etcd_members()) (void)c.Stop(e, SIGTERM, true, 5);
  };
  ::unlink((f.dir + "/metad.addr").c_str());  // a new metad writes it when up
  if (f.conf.base_port != 0) {
    // Fixed ports: forget remembered addresses of an earlier layout.
    for (uint32_t id = 1; id <= f.conf.servers; ++id)
      ::unlink((Chunkd(id).base(f.dir) + ".addr").c_str());
  }
  Status s =
      f.conf.etcd_members > 0 ? StartEtcdMembers(c, f.timeout_s) : Status::Ok();
  for (const Proc& m : c.metads())
    if (s.ok()) s = c.Start(m, f.timeout_s);
  if (!s.ok()) {
    teardown();
    return Fail(s);
  }
  for (uint32_t id = 1; id <= f.conf.servers && s.ok(); ++id) {
    Status st = c.Start(Chunkd(id), f.timeout_s);
    if (!st.ok()) s = st;
  }
  if (s.ok()) s = c.WaitRegistered(*key, f.timeout_s);
  if (s.ok()) s = c.WriteMetricsAddrs();
  if (!s.ok()) {
    teardown();
    return Fail(s);
  }
  if (network) network->Keep();
  std::printf("cluster up in %s: metad at %s, %u chunkd (%u+%u, cell %u)\n",
              f.dir.c_str(), c.meta_address().c_str(), f.conf.servers, f.conf.k,
              f.conf.m, f.conf.cell_size);
  if (c.net)
    std::printf(
        "network: one namespace per host (sfs-%s-*), %s.0/24, client %s on "
        "%s, links %s%s%s\n",
        c.net->tag.c_str(),
        c.net->HostAddress(0)
            .substr(0, c.net->HostAddress(0).rfind('.'))
            .c_str(),
        c.net->ClientAddress().c_str(), c.net->ClientLink().c_str(),
        f.net.link_rate.empty() ? "unlimited" : f.net.link_rate.c_str(),
        f.net.netem.empty() ? "" : ", netem ", f.net.netem.c_str());
  std::printf("meta: %s\nkey: %s\n", c.meta_address().c_str(),
              c.key_path().c_str());
  std::printf("use: --meta %s --key %s%s\n", c.meta_address().c_str(),
              c.key_path().c_str(),
              f.conf.secure ? " --secure (mounts: -o secure)" : "");
  std::printf("metrics: %s/metrics.addrs\n", f.dir.c_str());
  if (f.conf.etcd())
    std::printf("etcd: %u metads on %s%s\n", f.conf.metads,
                c.etcd_location().c_str(),
                f.conf.etcd_members > 0 ? "" : " (external)");
  return 0;
}

// `cluster status`'s etcd table: each member's address, pid and Raft role.
// Returns how many members do not answer.
int PrintEtcdStatus(const Cluster& c) {
  int bad = 0;
  std::printf("%-10s %-8s %-22s %-9s %s\n", "etcd", "pid", "address", "role",
              "raft term");
  for (const EtcdMemberStatus& m : c.etcd().Describe(kEtcdVolume)) {
    auto pid = AlivePid(Etcd(m.member).base(c.dir) + ".pid");
    bad += !m.answered;
    std::printf("%-10s %-8s %-22s %-9s %s\n", Etcd(m.member).name.c_str(),
                pid ? std::to_string(*pid).c_str() : "-", m.address.c_str(),
                !m.answered ? "-"
                : m.leader  ? "leader"
                            : "follower",
                m.answered ? std::to_string(m.raft_term).c_str()
                           : ("NOT SERVING (" + m.error + ")").c_str());
  }
  return bad;
}

// Each etcd metad on its own (a client would fail over past a dead one).
// Returns how many do not answer.
int PrintMetadStatus(const Cluster& c,
                     const std::shared_ptr<const rpc::ClusterKey>& key) {
  int bad = 0;
  for (const Proc& m : c.metads()) {
    const std::string addr = ReadFirstLine(m.base(c.dir) + ".addr");
    rpc::RpcClientOptions o = rpc::RemoteMetaService::DefaultOptions();
    o.call_timeout = std::chrono::milliseconds(3000);
    o.connect_timeout = std::chrono::milliseconds(500);
    rpc::RemoteMetaService meta(addr, key, o);
    auto geo = addr.empty() ? Result<Geometry>(Status::NotFound("no address"))
                            : meta.GetGeometry();
    bad += !geo.ok();
    std::printf(
        "%-10s %-22s %s\n", m.name.c_str(), addr.c_str(),
        geo.ok() ? "serving"
                 : ("NOT SERVING (" + geo.status().ToString() + ")").c_str());
  }
  return bad;
}

int RunStatus(const std::string& dir) {
  auto c = LoadCluster(dir);
  if (!c.ok()) return Fail(c.status());
  int bad = 0;
  std::vector<Proc> procs = c->etcd_members();
  for (const Proc& m : c->metads()) procs.push_back(m);
  for (uint32_t id = 1; id <= c->conf.servers; ++id)
    procs.push_back(Chunkd(id));
  std::printf("%-10s %-8s %-22s\n", "process", "pid", "address");
  for (const auto& p : procs) {
    auto pid = AlivePid(p.base(dir) + ".pid");
    if (!pid) ++bad;
    std::printf("%-10s %-8s %-22s%s\n", p.name.c_str(),
                pid ? std::to_string(*pid).c_str() : "-",
                ReadFirstLine(p.base(dir) + ".addr").c_str(),
                !pid            ? "  NOT RUNNING"
                : Stopped(*pid) ? "  STOPPED (SIGSTOP; `cluster kill "
                                  "--signal 18` resumes it)"
                                : "");
  }
  if (c->conf.etcd_members > 0) bad += PrintEtcdStatus(*c);
  if (!c->conf.etcd_location.empty())
    std::printf("etcd: external, %s\n", c->conf.etcd_location.c_str());
  auto key = rpc::ClusterKey::Load(c->key_path());
  if (!key.ok()) return Fail(key.status());
  *key = (*key)->WithSecureWire(c->conf.secure != 0);
  if (c->conf.etcd()) bad += PrintMetadStatus(*c, *key);
  std::string meta_addr = c->meta_address();
  if (meta_addr.empty()) {
    std::printf("metad: no address (not running)\n");
    return 1;
  }
  rpc::RpcClientOptions o = rpc::RemoteMetaService::DefaultOptions();
  o.call_timeout = std::chrono::milliseconds(3000);
  rpc::RemoteMetaService meta(meta_addr, *key, o);
  auto map = meta.GetClusterMap();
  auto geo = meta.GetGeometry();
  if (!map.ok() || !geo.ok()) {
    std::printf("metad at %s: %s\n", meta_addr.c_str(),
                (map.ok() ? geo.status() : map.status()).ToString().c_str());
    return 1;
  }
  std::printf("metad at %s: volume %u+%u cell %u, map epoch %llu\n",
              meta_addr.c_str(), geo->k, geo->m, geo->cell_size,
              static_cast<unsigned long long>(map->epoch));
  // `state` is metad's view: its health monitor marks servers that miss
  // probes down and brings them up again; `reachable` is our own Ping now.
  std::printf("%-4s %-22s %-14s %-6s %s\n", "id", "address", "domain", "state",
              "reachable");
  for (const auto& s : map->servers) {
    rpc::RpcClientOptions co = rpc::RemoteChunkService::DefaultOptions();
    co.call_timeout = std::chrono::milliseconds(2000);
    co.connect_timeout = std::chrono::milliseconds(500);
    rpc::RemoteChunkService chunk(s.address, *key, co);
    auto ping = chunk.Ping();
    if (!ping.ok() && s.state != ServerState::kOut) ++bad;
    std::string reach = ping.ok() ? "yes"
                        : ping.status().code() == EHOSTDOWN
                            ? "NO (connection refused or host down)"
                        : ping.status().code() == ETIMEDOUT
                            ? "NO (no answer within 2 s: hung or stopped?)"
                            : "NO (" + ping.status().ToString() + ")";
    if (s.state == ServerState::kUp && !ping.ok())
      reach += "; metad has not marked it down yet";
    if (s.state == ServerState::kDown && ping.ok())
      reach += "; metad will mark it up at its next probe";
    std::printf("%-4u %-22s %-14s %-6s %s\n", s.id, s.address.c_str(),
                s.failure_domain.c_str(), ServerStateName(s.state),
                reach.c_str());
  }
  return bad == 0 ? 0 : 1;
}

// SIGTERMs every process of `procs` first, so they shut down in parallel
// (each takes a moment: flush, close the store), then waits for each.
int StopTogether(Cluster& c, const std::vector<Proc>& procs, int grace_s) {
  std::vector<bool> signalled(procs.size(), false);
  for (size_t i = 0; i < procs.size(); ++i)
    signalled[i] = c.Stop(procs[i], SIGTERM, false, grace_s).ok();
  int stopped = 0;
  for (size_t i = 0; i < procs.size(); ++i) {
    if (!signalled[i]) continue;
    (void)c.Stop(procs[i], 0, true, grace_s);  // NotFound: already gone
    ++stopped;
  }
  return stopped;
}

int RunDown(const std::string& dir, int grace_s) {
  auto conf = LoadConf(dir);
  // A --netns `up` that failed early may have left only a network.
  if (!conf && !LoadNetnsLayout(dir)) return Fail(LoadCluster(dir).status());
  Cluster c{dir, conf.value_or(ClusterConf{}), std::nullopt};
  // chunkd first, metads next (stopping chunkds still talk to them), etcd
  // last (metads still write to it) and one by one: a stopping leader hands
  // its leadership over, which waits out the grace when every member stops.
  std::vector<Proc> chunkds;
  for (uint32_t id = 1; id <= c.conf.servers; ++id)
    chunkds.push_back(Chunkd(id));
  int stopped = StopTogether(c, chunkds, grace_s);
  stopped += StopTogether(c, c.metads(), grace_s);
  for (const Proc& e : c.etcd_members())
    stopped += c.Stop(e, SIGTERM, true, grace_s).ok();
  if (Status s = TeardownNetns(dir); !s.ok()) return Fail(s);
  std::printf("cluster in %s down (%d processes stopped)\n", dir.c_str(),
              stopped);
  return 0;
}

int RunPartition(const std::string& dir, const std::string& server, bool heal) {
  auto c = LoadCluster(dir);
  if (!c.ok()) return Fail(c.status());
  auto p = ParseServer(*c, server);
  if (!p.ok()) return Fail(p.status());
  if (Status s = SetHostLink(dir, p->id, heal); !s.ok()) return Fail(s);
  std::printf("%s %s\n", p->name.c_str(),
              heal ? "reachable again (link up)"
                   : "cut off (link down; still running)");
  return 0;
}

int RunKill(const std::string& dir, const std::string& server, int sig) {
  auto c = LoadCluster(dir);
  if (!c.ok()) return Fail(c.status());
  auto p = ParseServer(*c, server);
  if (!p.ok()) return Fail(p.status());
  // A kill leaves the pid file (status shows NOT RUNNING) unless we wait.
  const std::optional<pid_t> pid = AlivePid(p->base(dir) + ".pid");
  Status s = c->Stop(*p, sig, false, 0);
  if (!s.ok()) return Fail(s);
  // SIGSTOP/SIGCONT (hung-server tests) do not end the process: no wait.
  const bool ends = sig != SIGSTOP && sig != SIGCONT && sig != SIGTSTP;
  for (int i = 0; ends && pid && i < 250 && Running(*pid); ++i)  // <= 5 s
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::printf("sent signal %d to %s\n", sig, p->name.c_str());
  return 0;
}

int RunStart(const std::string& dir, const std::string& server, int timeout_s) {
  auto c = LoadCluster(dir);
  if (!c.ok()) return Fail(c.status());
  auto p = ParseServer(*c, server);
  if (!p.ok()) return Fail(p.status());
  Status s = c->Start(*p, timeout_s);
  if (s.ok() && p->kind == Proc::Kind::kEtcd)
    s = c->etcd().WaitServing(timeout_s, {p->id});
  if (s.ok()) s = c->WriteMetricsAddrs();
  if (!s.ok()) return Fail(s);
  std::printf("%s running at %s\n", p->name.c_str(),
              ReadFirstLine(p->base(dir) + ".addr").c_str());
  return 0;
}

CommandRegistration cluster_commands([](CLI::App& app) {
  auto* cluster = app.add_subcommand(
      "cluster",
      "run a local metad + N chunkd cluster on loopback (or, with up "
      "--netns, in network namespaces)");
  cluster->require_subcommand(1);
  {
    auto* cmd = cluster->add_subcommand(
        "up", "start metad and N chunkd in the background");
    auto f = std::make_shared<UpFlags>();
    cmd->add_option("--dir", f->dir,
                    "cluster directory (data, logs, pid files)")
        ->required();
    auto* n = cmd->add_option("--servers", f->conf.servers, "number of chunkd")
                  ->capture_default_str()
                  ->check(InRange(kServersRange));
    auto* k = cmd->add_option("--k", f->conf.k, "data chunks")
                  ->capture_default_str()
                  ->check(InRange(::stripefs::fs::kDataChunksRange));
    auto* m = cmd->add_option("--m", f->conf.m, "parity chunks")
                  ->capture_default_str()
                  ->check(InRange(::stripefs::fs::kParityChunksRange));
    auto* cs =
        cmd->add_option("--cell-size", f->conf.cell_size, "cell size in bytes")
            ->capture_default_str()
            ->check(InRange(::stripefs::fs::kCellSizeRange));
    auto* bp = cmd->add_option("--base-port", f->conf.base_port,
                               "metad on P, chunkd i on P+i (0: free ports)")
                   ->capture_default_str()
                   ->check(InRange(kPortRange));
    cmd->add_option("--timeout", f->timeout_s, "seconds to wait for start")
        ->capture_default_str()
        ->check(InRange(kTimeoutSecondsRange));
    auto* secure = cmd->add_flag(
        "--secure", f->secure,
        "daemons encrypt every connection and refuse unencrypted frames; "
        "clients need --secure (mounts -o secure). Kept for later `up`s");
    cmd->add_flag("--no-secure", f->insecure,
                  "turn an earlier --secure off (authenticated frames only)")
        ->excludes(secure);
    auto* netns = cmd->add_flag(
        "--netns", f->netns,
        "metad and every chunkd in a network namespace of its own on a "
        "bridge, addresses from 198.18.0.0/15 (root; docs/cluster.md)");
    cmd->add_option("--link-rate", f->net.link_rate,
                    "with --netns: tc tbf rate of every host link (1gbit, "
                    "10gbit, 100mbit)")
        ->needs(netns)
        ->check([](const std::string& v) {
          auto r = ParseLinkRate(v);
          return r.ok() ? std::string() : r.status().message();
        });
    cmd->add_option("--netem", f->net.netem,
                    "with --netns: tc netem arguments for every host link "
                    "(\"delay 1ms loss 0.1%\"); fails where the kernel has "
                    "no sch_netem")
        ->needs(netns);
    auto* me = cmd->add_option("--meta-engine", f->meta_engine,
                               "rocksdb (one metad) or etcd (an etcd cluster "
                               "of its own and --metads metads)")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"rocksdb", "etcd"}));
    auto* em = cmd->add_option("--etcd-members", f->conf.etcd_members,
                               "etcd members on loopback (etcd engine; "
                               "default 3)")
                   ->check(InRange(kEtcdMembersRange));
    auto* md = cmd->add_option("--metads", f->conf.metads,
                               "metads serving the volume (etcd engine)")
                   ->capture_default_str()
                   ->check(InRange(kMetadsRange));
    auto* et = cmd->add_option("--etcd-timeout-ms", f->conf.etcd_timeout_ms,
                               "metad's etcd calls fail (ETIMEDOUT) after "
                               "this long without a quorum")
                   ->capture_default_str()
                   ->check(InRange(kEtcdTimeoutMsRange));
    auto* el = cmd->add_option(
        "--etcd", f->conf.etcd_location,
        "etcd engine on an etcd run elsewhere (no members of our own): "
        "etcds://H:P[,H:P]/VOL?ca=FILE&cert=FILE&key=FILE, the certificate "
        "naming an etcd user whose role reaches VOL/ (docs/metadata.md)");
    auto* ei = cmd->add_flag(
        "--etcd-insecure", f->etcd_insecure,
        "allow a plaintext etcd://H:P/VOL for --etcd when every H is a "
        "loopback address (anyone who reaches etcd can rewrite the volume)");
    cmd->callback([=] {
      f->conf.etcd_insecure = f->etcd_insecure ? 1 : 0;
      f->engine_given = me->count() + em->count() + md->count() + et->count() +
                            el->count() + ei->count() >
                        0;
      ExitWith(RunUp(*f, k->count() + m->count() + cs->count() > 0,
                     n->count() > 0, bp->count() > 0));
    });
  }
  {
    auto* cmd = cluster->add_subcommand("status",
                                        "processes, map epoch, server states");
    auto dir = std::make_shared<std::string>();
    cmd->add_option("--dir", *dir, "cluster directory")->required();
    cmd->callback([dir] { ExitWith(RunStatus(*dir)); });
  }
  {
    auto* cmd =
        cluster->add_subcommand("down", "stop every process of the cluster");
    auto dir = std::make_shared<std::string>();
    auto grace = std::make_shared<int>(10);
    cmd->add_option("--dir", *dir, "cluster directory")->required();
    cmd->add_option("--grace", *grace, "seconds before SIGKILL")
        ->capture_default_str()
        ->check(InRange(kGraceSecondsRange));
    cmd->callback([dir, grace] { ExitWith(RunDown(*dir, *grace)); });
  }
  {
    auto* cmd = cluster->add_subcommand(
        "kill", "send a signal to one server (failure tests)");
    auto dir = std::make_shared<std::string>();
    auto server = std::make_shared<std::string>();
    auto sig = std::make_shared<int>(SIGKILL);
    cmd->add_option("--dir", *dir, "cluster directory")->required();
    cmd->add_option("--server", *server,
                    "chunkd id (1..N), metad, metad.I or etcd.I")
        ->required();
    cmd->add_option("--signal", *sig, "signal number")
        ->capture_default_str()
        ->check(InRange(kSignalRange));
    cmd->callback([=] { ExitWith(RunKill(*dir, *server, *sig)); });
  }
  for (bool heal : {false, true}) {
    auto* cmd = cluster->add_subcommand(
        heal ? "heal" : "partition",
        heal ? "reconnect a server cut off by `partition` (--netns clusters)"
             : "cut one server off the network, leaving it running "
               "(--netns clusters)");
    auto dir = std::make_shared<std::string>();
    auto server = std::make_shared<std::string>();
    cmd->add_option("--dir", *dir, "cluster directory")->required();
    cmd->add_option("--server", *server, "chunkd id (1..N) or metad")
        ->required();
    cmd->callback([=] { ExitWith(RunPartition(*dir, *server, heal)); });
  }
  {
    auto* cmd = cluster->add_subcommand(
        "start", "(re)start one server at its old address");
    auto dir = std::make_shared<std::string>();
    auto server = std::make_shared<std::string>();
    auto timeout = std::make_shared<int>(30);
    cmd->add_option("--dir", *dir, "cluster directory")->required();
    cmd->add_option("--server", *server,
                    "chunkd id (1..N), metad, metad.I or etcd.I")
        ->required();
    cmd->add_option("--timeout", *timeout, "seconds to wait")
        ->capture_default_str()
        ->check(InRange(kTimeoutSecondsRange));
    cmd->callback([=] { ExitWith(RunStart(*dir, *server, *timeout)); });
  }
});

}  // namespace
}  // namespace stripefs::tools

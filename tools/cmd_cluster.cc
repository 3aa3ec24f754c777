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
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/meta/etcd_kv.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/remote_meta_service.h"
#include "tools/cluster_daemons.h"
#include "tools/cluster_etcd.h"
#include "tools/cluster_files.h"
#include "tools/cluster_netns.h"
#include "tools/command.h"
#include "tools/option_ranges.h"

namespace stripefs::tools {
namespace {

namespace fs = std::filesystem;

int Fail(const Status& s) {
  std::fprintf(stderr, "stripefs cluster: %s\n", s.ToString().c_str());
  return 1;
}

// Parses --server: "metad"/"meta" (the first metad), "metad.I", "etcd.I"
// or a chunkd id in 1..N.
Result<Daemon> ParseServer(const ClusterDaemons& c, const std::string& s) {
  if (s == "metad" || s == "meta") return c.metads()[0];
  for (const Daemon& p : c.metads())
    if (s == p.name) return p;
  for (const Daemon& p : c.etcd_members())
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
Status StartEtcdMembers(ClusterDaemons& c, int timeout_s) {
  EtcdMembers etcd = c.etcd();
  STRIPEFS_RETURN_IF_ERROR(etcd.Plan());
  for (const Daemon& p : c.etcd_members())
    STRIPEFS_RETURN_IF_ERROR(c.Start(p, timeout_s));
  STRIPEFS_RETURN_IF_ERROR(etcd.WaitServing(timeout_s));
  return etcd.SetupAuth(kEtcdVolume);
}

// The flags of `up` merged with the earlier cluster in the same directory
// (`old`): what was not given again stays as it was.
Status ResolveUp(UpFlags* f, const std::optional<ClusterConf>& old,
                 bool geometry_given, bool servers_given, bool port_given) {
  STRIPEFS_RETURN_IF_ERROR(ResolveEngine(f, old));
  if (f->netns && f->conf.etcd())
    return Status::InvalidArgument(
        "--netns runs the rocksdb engine only (etcd members and several "
        "metads have no namespaces of their own yet); drop --netns or "
        "--meta-engine etcd");
  if (old) {  // restart of an existing cluster
    if (!geometry_given)
      f->conf.k = old->k, f->conf.m = old->m,
      f->conf.cell_size = old->cell_size;
    if (!servers_given) f->conf.servers = old->servers;
    if (!port_given) f->conf.base_port = old->base_port;
    f->conf.secure = old->secure;  // kept unless --secure/--no-secure
  }
  if (f->secure) f->conf.secure = 1;
  if (f->insecure) f->conf.secure = 0;
  if (f->conf.servers == 0 || f->conf.servers > 1000)
    return Status::InvalidArgument("--servers must be 1..1000");
  f->conf.netns = f->netns ? 1 : 0;
  return Status::Ok();
}

// The cluster key (made if absent), with the wire mode of the cluster.
Result<std::shared_ptr<const rpc::ClusterKey>> LoadOrMakeKey(
    const ClusterDaemons& c) {
  if (!fs::exists(c.key_path()))
    STRIPEFS_RETURN_IF_ERROR(rpc::ClusterKey::Generate(c.key_path()));
  STRIPEFS_ASSIGN_OR_RETURN(std::shared_ptr<const rpc::ClusterKey> key,
                            rpc::ClusterKey::Load(c.key_path()));
  return key->WithSecureWire(c.conf.secure != 0);
}

// Addresses remembered from an earlier `up` that no longer apply: those
// of the other network when --netns changed, fixed ports of an earlier
// layout, and metad.addr (a new metad writes it when up).
void ForgetStaleAddresses(const ClusterDaemons& c, bool was_netns) {
  if (was_netns != (c.conf.netns != 0)) {
    for (uint32_t id = 0; id <= c.conf.servers; ++id) {
      Daemon p = id == 0 ? Metad() : Chunkd(id);
      ::unlink((p.base(c.dir) + ".addr").c_str());
      ::unlink((p.base(c.dir) + ".metrics").c_str());
    }
  }
  ::unlink((c.dir + "/metad.addr").c_str());
  if (c.conf.base_port != 0) {
    for (uint32_t id = 1; id <= c.conf.servers; ++id)
      ::unlink((Chunkd(id).base(c.dir) + ".addr").c_str());
  }
}

// etcd members, metads, then chunkds; waits until every chunkd registered.
// On failure stops whatever it started.
Status StartDaemons(ClusterDaemons& c,
                    const std::shared_ptr<const rpc::ClusterKey>& key,
                    int timeout_s) {
  Status s =
      c.conf.etcd_members > 0 ? StartEtcdMembers(c, timeout_s) : Status::Ok();
  for (const Daemon& m : c.metads())
    if (s.ok()) s = c.Start(m, timeout_s);
  for (uint32_t id = 1; id <= c.conf.servers && s.ok(); ++id)
    s = c.Start(Chunkd(id), timeout_s);
  if (s.ok()) s = c.WaitRegistered(key, timeout_s);
  if (s.ok()) s = c.WriteMetricsAddrs();
  if (!s.ok()) {
    for (uint32_t id = 1; id <= c.conf.servers; ++id)
      (void)c.Stop(Chunkd(id), SIGTERM, true, 5);
    for (const Daemon& m : c.metads()) (void)c.Stop(m, SIGTERM, true, 5);
    for (const Daemon& e : c.etcd_members()) (void)c.Stop(e, SIGTERM, true, 5);
  }
  return s;
}

void PrintUp(const ClusterDaemons& c, const UpFlags& f) {
  std::printf("cluster up in %s: metad at %s, %u chunkd (%u+%u, cell %u)\n",
              c.dir.c_str(), c.meta_address().c_str(), c.conf.servers, c.conf.k,
              c.conf.m, c.conf.cell_size);
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
              c.conf.secure ? " --secure (mounts: -o secure)" : "");
  std::printf("metrics: %s/metrics.addrs\n", c.dir.c_str());
  if (c.conf.etcd())
    std::printf("etcd: %u metads on %s%s\n", c.conf.metads,
                c.etcd_location().c_str(),
                c.conf.etcd_members > 0 ? "" : " (external)");
}

int RunUp(UpFlags f, bool geometry_given, bool servers_given, bool port_given) {
  std::error_code ec;
  fs::create_directories(f.dir, ec);
  if (ec)
    return Fail(
        Status(ec.value(), "cannot create " + f.dir + ": " + ec.message()));
  f.dir = fs::absolute(f.dir).string();
  const std::optional<ClusterConf> old = LoadConf(f.dir);
  if (Status s = ResolveUp(&f, old, geometry_given, servers_given, port_given);
      !s.ok())
    return Fail(s);
  ClusterDaemons c{f.dir, f.conf, std::nullopt};
  for (const Daemon& m : c.metads()) {
    if (auto pid = AlivePid(m.base(f.dir) + ".pid"))
      return Fail(Status::Exists(
          "a cluster is already running in " + f.dir + " (" + m.name + " pid " +
          std::to_string(*pid) + "); `stripefs cluster down --dir " + f.dir +
          "` first"));
  }
  auto key = LoadOrMakeKey(c);
  if (!key.ok()) return Fail(key.status());
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
  ForgetStaleAddresses(c, old && old->netns != 0);
  if (Status s = StartDaemons(c, *key, f.timeout_s); !s.ok()) return Fail(s);
  if (network) network->Keep();
  PrintUp(c, f);
  return 0;
}

// `cluster status`'s etcd table: each member's address, pid and Raft role.
// Returns how many members do not answer.
int PrintEtcdStatus(const ClusterDaemons& c) {
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
int PrintMetadStatus(const ClusterDaemons& c,
                     const std::shared_ptr<const rpc::ClusterKey>& key) {
  int bad = 0;
  for (const Daemon& m : c.metads()) {
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
  std::vector<Daemon> procs = c->etcd_members();
  for (const Daemon& m : c->metads()) procs.push_back(m);
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

int RunDown(const std::string& dir, int grace_s) {
  auto conf = LoadConf(dir);
  // A --netns `up` that failed early may have left only a network.
  if (!conf && !LoadNetnsLayout(dir)) return Fail(LoadCluster(dir).status());
  ClusterDaemons c{dir, conf.value_or(ClusterConf{}), std::nullopt};
  // chunkd first, metads next (stopping chunkds still talk to them), etcd
  // last (metads still write to it) and one by one: a stopping leader hands
  // its leadership over, which waits out the grace when every member stops.
  std::vector<Daemon> chunkds;
  for (uint32_t id = 1; id <= c.conf.servers; ++id)
    chunkds.push_back(Chunkd(id));
  int stopped = StopTogether(c, chunkds, grace_s);
  stopped += StopTogether(c, c.metads(), grace_s);
  for (const Daemon& e : c.etcd_members())
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
  if (s.ok() && p->kind == Daemon::Kind::kEtcd)
    s = c->etcd().WaitServing(timeout_s, {p->id});
  if (s.ok()) s = c->WriteMetricsAddrs();
  if (!s.ok()) return Fail(s);
  std::printf("%s running at %s\n", p->name.c_str(),
              ReadFirstLine(p->base(dir) + ".addr").c_str());
  return 0;
}

// `cluster up`'s --meta-engine and etcd flags; the options returned say
// (by their counts) whether any was given.
std::vector<CLI::Option*> AddUpEngineFlags(CLI::App* cmd, UpFlags* f) {
  CLI::Option* me =
      cmd->add_option("--meta-engine", f->meta_engine,
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
  return {me, em, md, et, el, ei};
}

// `cluster up`'s wire and network flags: --secure / --no-secure, --netns
// and its links' --link-rate and --netem.
void AddUpNetworkFlags(CLI::App* cmd, UpFlags* f) {
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
}

// `stripefs cluster up`: its flags, then RunUp.
void AddClusterUp(CLI::App* cluster) {
  auto* cmd = cluster->add_subcommand(
      "up", "start metad and N chunkd in the background");
  auto f = std::make_shared<UpFlags>();
  cmd->add_option("--dir", f->dir, "cluster directory (data, logs, pid files)")
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
  AddUpNetworkFlags(cmd, f.get());
  const std::vector<CLI::Option*> engine = AddUpEngineFlags(cmd, f.get());
  cmd->callback([=] {
    f->conf.etcd_insecure = f->etcd_insecure ? 1 : 0;
    f->engine_given =
        std::any_of(engine.begin(), engine.end(),
                    [](CLI::Option* o) { return o->count() > 0; });
    ExitWith(RunUp(*f, k->count() + m->count() + cs->count() > 0,
                   n->count() > 0, bp->count() > 0));
  });
}

// `stripefs cluster status`.
void AddClusterStatus(CLI::App* cluster) {
  auto* cmd =
      cluster->add_subcommand("status", "processes, map epoch, server states");
  auto dir = std::make_shared<std::string>();
  cmd->add_option("--dir", *dir, "cluster directory")->required();
  cmd->callback([dir] { ExitWith(RunStatus(*dir)); });
}

// `stripefs cluster down`.
void AddClusterDown(CLI::App* cluster) {
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

// `stripefs cluster kill`.
void AddClusterKill(CLI::App* cluster) {
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

// `stripefs cluster partition` and `heal`.
void AddClusterPartition(CLI::App* cluster) {
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
}

// `stripefs cluster start`.
void AddClusterStart(CLI::App* cluster) {
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

CommandRegistration cluster_commands([](CLI::App& app) {
  auto* cluster = app.add_subcommand(
      "cluster",
      "run a local metad + N chunkd cluster on loopback (or, with up "
      "--netns, in network namespaces)");
  cluster->require_subcommand(1);
  AddClusterUp(cluster);
  AddClusterStatus(cluster);
  AddClusterDown(cluster);
  AddClusterKill(cluster);
  AddClusterPartition(cluster);
  AddClusterStart(cluster);
});

}  // namespace
}  // namespace stripefs::tools

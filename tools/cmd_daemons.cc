// `stripefs keygen`, `stripefs metad` and `stripefs chunkd`: the cluster
// key file and the two server daemons. metad serves a MetaStore, chunkd a
// ChunkStore, both over the RPC protocol of backend/rpc (HMAC with the
// cluster key). Both log to stderr, stop cleanly on SIGINT/SIGTERM, and can
// write a pid file and their actual listen address to files (for
// `stripefs cluster`, which starts them with port 0). With --metrics
// ADDR:PORT they serve Prometheus metrics (metrics/).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "backend/chunk/chunk_store.h"
#include "backend/meta/health_monitor.h"
#include "backend/meta/meta_store.h"
#include "backend/rpc/chunk_prober.h"
#include "backend/rpc/chunk_service_server.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/meta_inline_handler.h"
#include "backend/rpc/meta_service_server.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/remote_meta_service.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/tcp_socket.h"
#include "common/stop_signals.h"
#include "metrics/daemon_metrics.h"
#include "metrics/rpc_metrics.h"
#include "tools/command.h"
#include "tools/option_ranges.h"
#include "tools/readiness.h"

namespace stripefs::tools {
namespace {

void RevokeOnChunkServers(MetaStore* store,
                          const std::shared_ptr<const rpc::ClusterKey>& key,
                          const std::string& entity,
                          const rpc::EntitySalt& salt);

using rpc::ClusterKey;

int Fail(const char* who, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", who, s.ToString().c_str());
  return 1;
}

// Writes `text` + newline to `path` atomically (temp file + rename). The
// temp name carries our pid: `stripefs cluster start` writes the same pid
// file at the same time, through `path.tmp`.
Status WriteSmallFile(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text << "\n";
    if (!f) return Status::IoError("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::FromErrno(errno, "rename " + tmp + " -> " + path);
  return Status::Ok();
}

// Pid file (removed again on clean exit) and address file (kept, so a
// restart can reuse the address) of a daemon.
class DaemonFiles {
 public:
  DaemonFiles(std::string pid_file, std::string address_file)
      : pid_file_(std::move(pid_file)),
        address_file_(std::move(address_file)) {}
  ~DaemonFiles() {
    if (!pid_file_.empty()) ::unlink(pid_file_.c_str());
  }
  Status WritePid() {
    if (pid_file_.empty()) return Status::Ok();
    return WriteSmallFile(pid_file_, std::to_string(::getpid()));
  }
  Status WriteAddress(const std::string& addr) {
    if (address_file_.empty()) return Status::Ok();
    return WriteSmallFile(address_file_, addr);
  }

 private:
  std::string pid_file_, address_file_;
};

struct DaemonFlags {
  std::string key_file;
  std::string listen;
  std::string pid_file;
  std::string address_file;
  std::string metrics;  // ADDR:PORT of /metrics; empty: none
  std::string metrics_address_file;
  bool secure = false;  // encrypt every connection (refuse cleartext frames)
};

// The daemon's cluster key, in secure mode with --secure.
Result<std::shared_ptr<const ClusterKey>> LoadDaemonKey(const DaemonFlags& f) {
  STRIPEFS_ASSIGN_OR_RETURN(auto key, ClusterKey::Load(f.key_file));
  if (f.secure) return key->WithSecureWire(true);
  return key;
}

// The daemon's Prometheus endpoint: the RPC handler wrapped to time every
// request, and the server's counters. Null when --metrics is not given.
class DaemonMetrics {
 public:
  static Result<std::unique_ptr<DaemonMetrics>> Create(const DaemonFlags& f,
                                                       rpc::RpcHandler* inner) {
    if (f.metrics.empty()) return std::unique_ptr<DaemonMetrics>();
    std::unique_ptr<DaemonMetrics> m(new DaemonMetrics());
    auto registry = std::make_shared<prometheus::Registry>();
    m->timed_ = std::make_unique<metrics::TimedRpcHandler>(inner, *registry);
    STRIPEFS_ASSIGN_OR_RETURN(
        m->server_, metrics::MetricsServer::Start(f.metrics, registry));
    if (!f.metrics_address_file.empty()) {
      STRIPEFS_RETURN_IF_ERROR(
          WriteSmallFile(f.metrics_address_file, m->server_->address()));
    }
    return m;
  }
  rpc::RpcHandler* handler() { return timed_.get(); }
  metrics::MetricsServer& server() { return *server_; }
  // Stops serving: call before the RPC server and the stores the
  // collectors read go away (the wrapped handler stays until destruction).
  void StopServing() { server_.reset(); }

 private:
  DaemonMetrics() = default;
  std::unique_ptr<metrics::TimedRpcHandler> timed_;
  std::unique_ptr<metrics::MetricsServer> server_;
};

// CLI check of --listen / --metrics: "" when `v` is HOST:PORT (HOST an IPv4
// address or a name) or a bare PORT, else a one-line error naming the fix.
std::string CheckListenAddress(const std::string& v) {
  auto hp = rpc::ParseHostPort(v);
  if (!hp.ok() || hp->host.find_first_of(":[]") != std::string::npos)
    return "'" + v +
           "' is not an address to listen on: give IPv4 HOST:PORT (e.g. "
           "127.0.0.1:7000, 198.18.0.2:7000, 0.0.0.0:7000) or a bare PORT "
           "for loopback";
  return "";
}

// The bind error of a --listen address no interface here has, with the fix.
Status ExplainListenError(const Status& s, const std::string& listen) {
  if (s.code() != EADDRNOTAVAIL) return s;
  return Status(s.code(), s.message() +
                              " (no interface of this host or network "
                              "namespace has the address of --listen " +
                              listen +
                              "; use one it has, or 0.0.0.0 with --advertise)");
}

void AddDaemonFlags(CLI::App* cmd, DaemonFlags* f, const std::string& listen) {
  f->listen = listen;
  cmd->add_option("--key", f->key_file,
                  "the cluster's server key file (make one with `stripefs "
                  "keygen FILE`)")
      ->required();
  cmd->add_option("--listen", f->listen,
                  "HOST:PORT or PORT to listen on (loopback unless a host is "
                  "given; port 0 picks a free one)")
      ->capture_default_str()
      ->check(CheckListenAddress);
  cmd->add_option("--pid-file", f->pid_file, "write the process id here");
  cmd->add_option("--address-file", f->address_file,
                  "write the actual listen address here once listening");
  cmd->add_option("--metrics", f->metrics,
                  "serve Prometheus metrics on HOST:PORT (/metrics; port 0 "
                  "picks a free one)")
      ->check(CheckListenAddress);
  cmd->add_option("--metrics-address-file", f->metrics_address_file,
                  "write the actual metrics address here once serving");
  cmd->add_flag("--secure", f->secure,
                "encrypt every connection (payload and chunk data) and refuse "
                "unencrypted frames; clients then need --secure (mounts: -o "
                "secure). Off: frames are authenticated but readable on the "
                "network");
}

// ---- keygen -----------------------------------------------------------------

int RunKeygen(const std::string& path) {
  Status s = ClusterKey::Generate(path);
  if (!s.ok()) return Fail("stripefs keygen", s);
  std::printf(
      "wrote a new 32-byte cluster key to %s (mode 0600); pass it "
      "with --key to metad, every chunkd and every client\n",
      path.c_str());
  return 0;
}

// ---- metad ------------------------------------------------------------------

struct MetadFlags {
  DaemonFlags d;
  std::string dir;
  std::string identities;  // identity table file; default: KEY.identities
  Geometry geometry;
  bool geometry_given = false;
  bool health_monitor = true;
  int64_t probe_interval_ms = 1000;
  int64_t probe_timeout_ms = 1000;
  HealthMonitorOptions health;
  // MetaStoreOptions::namespace_sync_delay; docs/metadata.md, "Durability
  // of namespace operations", says why 5 ms and not 0.
  int64_t namespace_sync_ms = 5;
  // Cheap requests on the RPC loop thread (backend/rpc/meta_inline_handler.h).
  bool inline_rpc = true;
  bool etcd_insecure = false;  // MetaStoreOptions::etcd_insecure_loopback
};

// The volume metad serves: its store, opened or (first start) created.
struct MetadVolume {
  std::unique_ptr<MetaStore> store;
  bool created = false;
  Geometry geometry;
};

// Opens or creates the store of --dir; 0, or the exit status with the
// reason printed (a geometry that contradicts --k/--m/--cell-size too).
int OpenMetadVolume(const char* who, const MetadFlags& f, MetadVolume* out) {
  MetaStoreOptions mo;
  mo.namespace_sync_delay = std::chrono::milliseconds(f.namespace_sync_ms);
  mo.etcd_insecure_loopback = f.etcd_insecure;
  Result<std::unique_ptr<MetaStore>> store = Status::IoError("unset");
  if (MetaStore::Exists(f.dir, mo)) {
    store = MetaStore::Open(f.dir, mo);
  } else {
    store = MetaStore::Create(f.dir, f.geometry, mo);
    out->created = true;
  }
  if (!store.ok()) {
    Status st = store.status().Annotate("metadata store in " + f.dir);
    if (st.code() == EBADMSG) {
      st = Status(EBADMSG, st.message() + ". " + fs::CorruptMetadataFix(f.dir));
    }
    return Fail(who, st);
  }
  out->store = std::move(store).value();
  auto geometry = out->store->GetGeometry();
  if (!geometry.ok()) return Fail(who, geometry.status());
  out->geometry = *geometry;
  if (!out->created && f.geometry_given && !(*geometry == f.geometry)) {
    std::fprintf(stderr,
                 "%s: the volume in %s has geometry %u+%u cell %u, not the "
                 "%u+%u cell %u given; drop --k/--m/--cell-size or use "
                 "another --dir\n",
                 who, f.dir.c_str(), geometry->k, geometry->m,
                 geometry->cell_size, f.geometry.k, f.geometry.m,
                 f.geometry.cell_size);
    return 1;
  }
  return 0;
}

// Admin and client identities (`stripefs auth`); the server key is always
// admitted. Warns when there are none.
Result<std::unique_ptr<rpc::IdentityTable>> OpenIdentities(
    const MetadFlags& f) {
  const std::string id_file =
      f.identities.empty() ? f.d.key_file + ".identities" : f.identities;
  auto identities = rpc::IdentityTable::Open(id_file);
  if (!identities.ok()) return identities.status();
  if ((*identities)->size() == 0) {
    std::fprintf(stderr,
                 "metad: warning: no admin or client identities in %s: "
                 "every process uses the server key and may call every RPC; "
                 "give mounts their own keys with `stripefs auth add "
                 "client.NAME` (docs/cluster.md \"Identities\")\n",
                 id_file.c_str());
  }
  return identities;
}

// metad's handler: identities, chunk grants, and `stripefs auth rm`, which
// closes the removed identity's open sessions at once (on `serving`, once
// set) and voids its chunk grants on every chunkd (which close its
// sessions).
Status ServeMetadExtras(rpc::MetaServiceServer* handler, MetaStore* store,
                        rpc::IdentityTable* identities,
                        std::shared_ptr<const rpc::ClusterKey> server_key,
                        std::atomic<rpc::RpcServer*>* serving) {
  handler->ServeIdentities(identities, server_key);
  // Chunk grants: clients get them here and show them to chunkd.
  auto grant_key = rpc::GrantKey::Derive(*server_key, store->volume_uuid());
  if (!grant_key.ok()) return grant_key.status();
  handler->ServeGrants(*grant_key);
  handler->OnIdentityRemoved(
      [serving, store, server_key](const std::string& entity,
                                   const rpc::EntitySalt& salt) {
        if (rpc::RpcServer* s = serving->load()) s->CloseSessionsOf(entity);
        RevokeOnChunkServers(store, server_key, entity, salt);
      });
  return Status::Ok();
}

// Failure detector: marks chunk servers that stop answering down (and up
// again), see backend/meta/health_monitor.h and docs/cluster.md. Started
// unless --no-health-monitor.
void StartHealthMonitor(const MetadFlags& f, const HealthMonitorOptions& ho,
                        HealthMonitor* monitor) {
  if (!f.health_monitor) {
    std::fprintf(stderr,
                 "metad: health monitor off (--no-health-monitor): crashed "
                 "chunk servers stay `up` in the map\n");
    return;
  }
  monitor->Start();
  std::fprintf(stderr,
               "metad: health monitor: probing chunk servers every %lld ms "
               "(timeout %lld ms), down after %u misses, up after %u "
               "answers\n",
               static_cast<long long>(f.probe_interval_ms),
               static_cast<long long>(f.probe_timeout_ms), ho.down_after,
               ho.up_after);
}

// The last line of a daemon: what its RPC server served.
void LogStopped(const std::string& who, const rpc::RpcServerCounters& c) {
  std::fprintf(stderr,
               "%s: stopped (%llu connections, %llu requests, %llu frames "
               "rejected)\n",
               who.c_str(), static_cast<unsigned long long>(c.connections),
               static_cast<unsigned long long>(c.requests),
               static_cast<unsigned long long>(c.rejected_total()));
}

int RunMetad(const MetadFlags& f) {
  const char* who = "metad";
  HealthMonitorOptions ho = f.health;
  ho.interval = std::chrono::milliseconds(f.probe_interval_ms);
  ho.probe_timeout = std::chrono::milliseconds(f.probe_timeout_ms);
  if (Status s = HealthMonitor::Validate(ho); !s.ok()) return Fail(who, s);
  auto stop = StopSignals::Install();
  if (!stop.ok()) return Fail(who, stop.status());
  auto key = LoadDaemonKey(f.d);
  if (!key.ok()) return Fail(who, key.status());
  DaemonFiles files(f.d.pid_file, f.d.address_file);
  if (Status s = files.WritePid(); !s.ok()) return Fail(who, s);
  MetadVolume vol;
  if (int rc = OpenMetadVolume(who, f, &vol); rc != 0) return rc;
  MetaStore* store = vol.store.get();
  auto identities = OpenIdentities(f);
  if (!identities.ok()) return Fail(who, identities.status());
  // Mounts and repairs announce themselves here (`stripefs status`).
  rpc::ClientTable clients;
  rpc::MetaServiceServer handler(store, &clients);
  std::atomic<rpc::RpcServer*> serving{nullptr};
  if (Status s =
          ServeMetadExtras(&handler, store, identities->get(), *key, &serving);
      !s.ok())
    return Fail(who, s);
  auto metrics = DaemonMetrics::Create(f.d, &handler);
  if (!metrics.ok()) return Fail(who, metrics.status());
  rpc::MetaInlineHandler inline_handler(
      *metrics ? (*metrics)->handler() : &handler, store);
  rpc::RpcServerOptions so;
  so.listen = f.d.listen;
  so.log_name = "metad";
  so.binding = {rpc::ServerRole::kMetad, 0, store->volume_uuid()};
  so.gate = identities->get();
  so.inline_requests = f.inline_rpc;
  auto server = rpc::RpcServer::Start(so, *key, &inline_handler);
  if (!server.ok())
    return Fail(who, ExplainListenError(server.status(), f.d.listen));
  serving = server->get();
  if (*metrics) {
    (*metrics)->server().AddCollector(
        metrics::RpcServerCollector(server->get(), "metad"));
    (*metrics)->server().AddCollector(metrics::ClusterMapCollector(store));
    (*metrics)->server().AddCollector(metrics::ClientTableCollector(&clients));
    std::fprintf(stderr, "metad: metrics on http://%s/metrics\n",
                 (*metrics)->server().address().c_str());
  }
  if (Status s = files.WriteAddress((*server)->address()); !s.ok())
    return Fail(who, s);
  std::fprintf(stderr,
               "metad: %s volume %s in %s (%u+%u, cell %u bytes); listening "
               "on %s\n",
               vol.created ? "created" : "opened",
               rpc::VolumeIdHex(store->volume_uuid()).c_str(), f.dir.c_str(),
               vol.geometry.k, vol.geometry.m, vol.geometry.cell_size,
               (*server)->address().c_str());
  std::printf("%s\n", (*server)->address().c_str());
  std::fflush(stdout);
  NotifyReady("serving on " + (*server)->address());

  ChunkProber prober(*key, store->volume_uuid());
  // Several metads may serve an etcd volume: one monitors at a time.
  if (MetaStore::IsEtcdLocation(f.dir)) {
    ho.leader_id = (*server)->address() + "/" + std::to_string(getpid());
  }
  HealthMonitor monitor(store, &prober, ho);
  StartHealthMonitor(f, ho, &monitor);

  int sig = (*stop)->Wait();
  std::fprintf(stderr, "metad: %s received, stopping\n", strsignal(sig));
  NotifyStopping();
  if (*metrics) (*metrics)->StopServing();
  monitor.Stop();
  (*server)->Stop();
  LogStopped(who, (*server)->counters());
  return 0;
}

// ---- chunkd -----------------------------------------------------------------

struct ChunkdFlags {
  DaemonFlags d;
  std::string dir;
  uint32_t id = 0;
  std::string meta;
  std::string failure_domain;
  std::string advertise;
  int register_timeout_s = 30;
};

// Registers (id, address, domain) with metad, retrying while metad is not
// reachable yet. Keeps a server an operator marked `out` out.
Status Register(rpc::RemoteMetaService& meta, const ServerInfo& me,
                int timeout_s) {
  auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  Status last;
  do {
    auto map = meta.GetClusterMap();
    if (map.ok()) {
      ServerInfo info = me;
      for (const auto& s : map->servers) {
        if (s.id == me.id && s.state == ServerState::kOut) info.state = s.state;
      }
      last = meta.UpsertServer(info);
      if (last.ok() || !rpc::IsTransportError(last)) return last;
    } else {
      last = map.status();
      if (!rpc::IsTransportError(last)) return last;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < until);
  return last;
}

// Tells every chunk server of the map that `entity` (with `salt`) was
// removed: it refuses that identity's chunk grants from then on and closes
// its sessions. Best effort, all servers at once, 2 s each: a server that
// misses it still refuses the grants once they expire (kGrantLifetimeMs).
void RevokeOnChunkServers(MetaStore* store,
                          const std::shared_ptr<const rpc::ClusterKey>& key,
                          const std::string& entity,
                          const rpc::EntitySalt& salt) {
  auto map = store->GetClusterMap();
  if (!map.ok()) {
    std::fprintf(stderr, "metad: cannot revoke %s's chunk grants: %s\n",
                 entity.c_str(), map.status().ToString().c_str());
    return;
  }
  std::vector<std::thread> calls;
  for (const ServerInfo& server : map->servers) {
    if (server.address.empty()) continue;
    calls.emplace_back([&, server] {
      rpc::RpcClientOptions o = rpc::RemoteChunkService::DefaultOptions();
      o.call_timeout = std::chrono::milliseconds(2000);
      o.connect_timeout = std::chrono::milliseconds(1000);
      o.expected_server = {rpc::ServerRole::kChunkd, server.id,
                           store->volume_uuid()};
      rpc::RemoteChunkService chunkd(server.address, key, o);
      Status st = chunkd.RevokeGrants(entity, salt);
      if (!st.ok())
        std::fprintf(stderr,
                     "metad: chunkd %u did not hear that %s was removed "
                     "(its grants there end when they expire): %s\n",
                     server.id, entity.c_str(), st.ToString().c_str());
    });
  }
  for (std::thread& t : calls) t.join();
}

// The UUID of the volume metad serves (from its handshake), waiting while
// metad is not reachable yet: chunkd names it in its own handshake, so
// clients of another volume that share the key refuse it.
Result<rpc::VolumeId> LearnVolume(const std::string& meta_address,
                                  std::shared_ptr<const rpc::ClusterKey> key,
                                  int timeout_s) {
  rpc::RpcClientOptions mo = rpc::RemoteMetaService::DefaultOptions();
  mo.call_timeout = std::chrono::milliseconds(5000);
  rpc::RemoteMetaService meta(meta_address, std::move(key), mo);
  auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  Status last;
  do {
    auto role = meta.Ping();
    if (role.ok()) {
      rpc::VolumeId v = meta.client().volume();
      if (rpc::IsZero(v))
        return Status(EPROTO, "metad at " + meta_address +
                                  " names no volume UUID in its handshake");
      return v;
    }
    last = role.status();
    if (!rpc::IsTransportError(last)) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < until);
  return last;
}

// What chunkd registers: its id, `address`, failure domain, up.
ServerInfo ChunkdServerInfo(const ChunkdFlags& f, const std::string& address) {
  ServerInfo me;
  me.id = f.id;
  me.address = address;
  me.failure_domain = f.failure_domain.empty()
                          ? "chunkd-" + std::to_string(f.id)
                          : f.failure_domain;
  me.state = ServerState::kUp;
  return me;
}

// Registers `me` with the metad of --meta that serves `volume`. Connected
// only while registering, so metad's open connections are its clients
// (mounts, tools), which `stripefs status` reports.
Status RegisterChunkd(const ChunkdFlags& f,
                      std::shared_ptr<const rpc::ClusterKey> key,
                      const rpc::VolumeId& volume, const ServerInfo& me) {
  rpc::RpcClientOptions mo = rpc::RemoteMetaService::DefaultOptions();
  mo.call_timeout = std::chrono::milliseconds(5000);
  mo.expected_server.volume = volume;  // the metad we learned it from
  rpc::RemoteMetaService meta(f.meta, std::move(key), mo);
  return Register(meta, me, f.register_timeout_s);
}

// Tells metad we are gone on purpose (best effort, short timeout), unless
// an operator marked us out.
void SayGoodbye(const ChunkdFlags& f,
                std::shared_ptr<const rpc::ClusterKey> key) {
  rpc::RpcClientOptions quick = rpc::RemoteMetaService::DefaultOptions();
  quick.call_timeout = std::chrono::milliseconds(1000);
  quick.connect_timeout = std::chrono::milliseconds(500);
  rpc::RemoteMetaService bye(f.meta, std::move(key), quick);
  auto map = bye.GetClusterMap();
  bool out = false;
  if (map.ok()) {
    for (const auto& s : map->servers)
      if (s.id == f.id && s.state == ServerState::kOut) out = true;
    if (!out) (void)bye.SetServerState(f.id, ServerState::kDown);
  }
}

// The address clients reach chunkd at: --advertise, else `listening`;
// "" (the reason printed) when that is all interfaces.
std::string AdvertisedAddress(const std::string& who, const ChunkdFlags& f,
                              const std::string& listening) {
  std::string address = f.advertise.empty() ? listening : f.advertise;
  if (address.rfind("0.0.0.0:", 0) == 0) {
    std::fprintf(stderr,
                 "%s: listening on all interfaces (%s) but clients need a "
                 "reachable address: pass --advertise HOST:PORT\n",
                 who.c_str(), address.c_str());
    return "";
  }
  return address;
}

int RunChunkd(const ChunkdFlags& f) {
  std::string who = "chunkd " + std::to_string(f.id);
  auto stop = StopSignals::Install();
  if (!stop.ok()) return Fail(who.c_str(), stop.status());
  auto key = LoadDaemonKey(f.d);
  if (!key.ok()) return Fail(who.c_str(), key.status());
  DaemonFiles files(f.d.pid_file, f.d.address_file);
  if (Status s = files.WritePid(); !s.ok()) return Fail(who.c_str(), s);

  auto store = ChunkStore::Open(f.dir);
  if (!store.ok())
    return Fail(who.c_str(),
                store.status().Annotate("chunk store in " + f.dir));
  rpc::ChunkServiceServer handler(store->get());
  auto metrics = DaemonMetrics::Create(f.d, &handler);
  if (!metrics.ok()) return Fail(who.c_str(), metrics.status());
  auto volume = LearnVolume(f.meta, *key, f.register_timeout_s);
  if (!volume.ok())
    return Fail(who.c_str(),
                volume.status().Annotate(
                    "cannot register with metad at " + f.meta +
                    " (chunkd learns the volume's UUID from it first)"));
  // Client identities' chunk requests need grants from metad.
  auto grant_key = rpc::GrantKey::Derive(**key, *volume);
  if (!grant_key.ok()) return Fail(who.c_str(), grant_key.status());
  handler.RequireGrants(*grant_key);
  std::atomic<rpc::RpcServer*> serving{nullptr};
  handler.OnGrantsRevoked([&serving](const std::string& entity) {
    if (rpc::RpcServer* s = serving.load()) s->CloseSessionsOf(entity);
  });
  rpc::RpcServerOptions so;
  so.listen = f.d.listen;
  so.log_name = who;
  so.binding = {rpc::ServerRole::kChunkd, f.id, *volume};
  auto server = rpc::RpcServer::Start(
      so, *key, *metrics ? (*metrics)->handler() : &handler);
  if (!server.ok())
    return Fail(who.c_str(), ExplainListenError(server.status(), f.d.listen));
  serving = server->get();
  if (*metrics) {
    (*metrics)->server().AddCollector(
        metrics::RpcServerCollector(server->get(), "chunkd"));
    (*metrics)->server().AddCollector(
        metrics::ChunkStoreCollector(store->get(), f.id));
    (*metrics)->server().AddCollector(
        metrics::ChunkEngineCollector(store->get(), f.id));
    std::fprintf(stderr, "%s: metrics on http://%s/metrics\n", who.c_str(),
                 (*metrics)->server().address().c_str());
  }
  const std::string address = AdvertisedAddress(who, f, (*server)->address());
  if (address.empty()) return 1;

  const ServerInfo me = ChunkdServerInfo(f, address);
  if (Status s = RegisterChunkd(f, *key, *volume, me); !s.ok()) {
    (*server)->Stop();
    return Fail(who.c_str(),
                s.Annotate("cannot register with metad at " + f.meta));
  }
  if (Status s = files.WriteAddress(address); !s.ok())
    return Fail(who.c_str(), s);
  std::fprintf(stderr,
               "%s: store %s, listening on %s, domain '%s', registered with "
               "metad at %s\n",
               who.c_str(), f.dir.c_str(), (*server)->address().c_str(),
               me.failure_domain.c_str(), f.meta.c_str());
  std::printf("%s\n", address.c_str());
  std::fflush(stdout);
  NotifyReady("serving on " + address + ", registered with " + f.meta);

  int sig = (*stop)->Wait();
  std::fprintf(stderr, "%s: %s received, stopping\n", who.c_str(),
               strsignal(sig));
  NotifyStopping();
  if (*metrics) (*metrics)->StopServing();
  (*server)->Stop();
  SayGoodbye(f, *key);
  LogStopped(who, (*server)->counters());
  return 0;
}

// `stripefs keygen FILE`.
void AddKeygenCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "keygen", "create a random 32-byte cluster key file (mode 0600)");
  auto path = std::make_shared<std::string>();
  cmd->add_option("FILE", *path, "key file to create")->required();
  cmd->callback([path] { ExitWith(RunKeygen(*path)); });
}

// `stripefs metad`: its flags, then RunMetad.
void AddMetadCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "metad", "run the metadata service (creates the volume on first start)");
  auto f = std::make_shared<MetadFlags>();
  cmd->add_option("--dir", f->dir,
                  "metadata directory (RocksDB), or "
                  "etcds://HOST:PORT[,HOST:PORT...]/PREFIX?ca=FILE&cert="
                  "FILE&key=FILE for a volume in etcd that several metads "
                  "may serve (docs/metadata.md, \"etcd security\")")
      ->required();
  cmd->add_flag("--etcd-insecure", f->etcd_insecure,
                "allow a plaintext etcd://HOST:PORT/PREFIX --dir when every "
                "HOST is a loopback address (anyone who reaches etcd can "
                "rewrite the volume)");
  AddDaemonFlags(cmd, &f->d, "127.0.0.1:7000");
  cmd->add_option("--identities", f->identities,
                  "identity table of `stripefs auth` (default: the --key "
                  "file's path + .identities)");
  auto* k = cmd->add_option("--k", f->geometry.k,
                            "data chunks per stripe (new volume)")
                ->capture_default_str()
                ->check(InRange(::stripefs::fs::kDataChunksRange));
  auto* m = cmd->add_option("--m", f->geometry.m,
                            "parity chunks per stripe (new volume)")
                ->capture_default_str()
                ->check(InRange(::stripefs::fs::kParityChunksRange));
  auto* c = cmd->add_option("--cell-size", f->geometry.cell_size,
                            "chunk (cell) size in bytes (new volume)")
                ->capture_default_str()
                ->check(InRange(::stripefs::fs::kCellSizeRange));
  cmd->add_option("--probe-interval-ms", f->probe_interval_ms,
                  "health monitor: milliseconds between probes of each "
                  "chunk server")
      ->capture_default_str()
      ->check(InRange(kProbeMsRange));
  cmd->add_option("--probe-timeout-ms", f->probe_timeout_ms,
                  "health monitor: a probe not answered within this many "
                  "milliseconds is a miss")
      ->capture_default_str()
      ->check(InRange(kProbeMsRange));
  cmd->add_option("--down-after", f->health.down_after,
                  "health monitor: consecutive missed probes before an up "
                  "server is marked down")
      ->capture_default_str()
      ->check(InRange(kProbeCountRange));
  cmd->add_option("--up-after", f->health.up_after,
                  "health monitor: consecutive answered probes before a "
                  "down server is marked up")
      ->capture_default_str()
      ->check(InRange(kProbeCountRange));
  cmd->add_option(
         "--namespace-sync-ms", f->namespace_sync_ms,
         "acknowledge namespace changes (create, unlink, rename, ...) once "
         "written to the metadata WAL and sync it within this many ms, as "
         "a local file system's journal does (safe from a metad crash; "
         "fsync/fsyncdir/syncfs and data commits wait for the sync); 0 "
         "syncs every change before answering. No effect on etcd")
      ->capture_default_str()
      ->check(InRange(kNamespaceSyncMsRange));
  cmd->add_flag("!--no-inline-rpc", f->inline_rpc,
                "hand every request to a worker thread, even the cheap "
                "reads and unsynced namespace changes the RPC loop thread "
                "answers itself by default (for comparisons)");
  cmd->add_flag("!--no-health-monitor", f->health_monitor,
                "do not probe chunk servers (nothing marks a crashed or "
                "hung chunkd down; never marks servers out either way)");
  cmd->callback([f, k, m, c] {
    f->geometry_given = k->count() + m->count() + c->count() > 0;
    ExitWith(RunMetad(*f));
  });
}

// `stripefs chunkd`: its flags, then RunChunkd.
void AddChunkdCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chunkd", "run a chunk server and register it with metad");
  auto f = std::make_shared<ChunkdFlags>();
  cmd->add_option("--dir", f->dir, "chunk store directory")->required();
  cmd->add_option("--id", f->id, "server id, unique in the cluster")
      ->required()
      ->check(InRange(kServerIdRange));
  cmd->add_option("--meta", f->meta, "metad address HOST:PORT")->required();
  AddDaemonFlags(cmd, &f->d, "127.0.0.1:0");
  cmd->add_option("--failure-domain", f->failure_domain,
                  "failure domain (host, rack...); default chunkd-<id>");
  cmd->add_option("--advertise", f->advertise,
                  "address to register instead of the listen address");
  cmd->add_option("--register-timeout", f->register_timeout_s,
                  "seconds to keep trying to reach metad at start")
      ->capture_default_str()
      ->check(InRange(kTimeoutSecondsRange));
  cmd->callback([f] { ExitWith(RunChunkd(*f)); });
}

CommandRegistration daemon_commands([](CLI::App& app) {
  AddKeygenCommand(app);
  AddMetadCommand(app);
  AddChunkdCommand(app);
});

}  // namespace
}  // namespace stripefs::tools

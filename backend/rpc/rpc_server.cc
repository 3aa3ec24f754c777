#include "backend/rpc/rpc_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

#include "backend/rpc/poll_server_loop.h"
#include "backend/rpc/server_core.h"
#include "backend/rpc/uring_server_loop.h"

namespace stripefs::rpc {
namespace {

// Every open connection is an fd: raise the soft RLIMIT_NOFILE to cover the
// configured limits (up to the hard limit), and say so when it cannot.
void FitFdLimit(const RpcServerOptions& o) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = static_cast<rlim_t>(o.max_connections + o.max_pending + 64);
  if (rl.rlim_cur >= want) return;
  rlim_t can =
      rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
  if (can > rl.rlim_cur) {
    rl.rlim_cur = can;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (can < want) {
    std::fprintf(stderr,
                 "%s: RLIMIT_NOFILE hard limit %llu is below the %llu file "
                 "descriptors the connection limits need; raise it (ulimit "
                 "-Hn) or lower max_connections\n",
                 o.log_name.c_str(), static_cast<unsigned long long>(can),
                 static_cast<unsigned long long>(want));
  }
}

}  // namespace

Result<std::unique_ptr<RpcServer>> RpcServer::Start(
    RpcServerOptions options, std::shared_ptr<const ClusterKey> key,
    RpcHandler* handler) {
  if (!key) return Status::InvalidArgument("RpcServer needs a cluster key");
  if (key->principal() != Principal::kServer)
    return Status::InvalidArgument(
        "a server needs the cluster's server key (the 32-byte file of "
        "`stripefs keygen`), not the identity file of " +
        std::string(key->entity()));
  if (options.binding.role == ServerRole::kAny) {
    // The role follows from what is served; a chunkd's id comes from the
    // caller (RpcServerOptions::binding).
    std::string role = handler->Role();
    if (role == "metad") options.binding.role = ServerRole::kMetad;
    if (role == "chunkd") options.binding.role = ServerRole::kChunkd;
  }
  if (options.max_connections == 0 || options.max_connections_per_ip == 0 ||
      options.max_pending == 0 || options.max_pending_per_ip == 0)
    return Status::InvalidArgument(
        "RpcServer connection limits (max_connections[_per_ip], "
        "max_pending[_per_ip]) must be >= 1");
  if (options.handshake_timeout.count() <= 0 ||
      options.header_timeout.count() <= 0 || options.idle_timeout.count() <= 0)
    return Status::InvalidArgument(
        "RpcServer handshake/header/idle timeouts must be > 0 ms");
  FitFdLimit(options);
  std::unique_ptr<RpcServer> s(new RpcServer());
  s->core_ =
      std::make_unique<ServerCore>(std::move(options), std::move(key), handler);
  const RpcServerOptions& o = s->core_->options;
  STRIPEFS_ASSIGN_OR_RETURN(s->listen_fd_, ListenTcp(o.listen, &s->address_));
  if (o.use_io_uring) {
    auto u = UringServerLoop::Start(s->core_.get(), s->listen_fd_.get());
    if (u.ok()) {
      s->loop_ = std::move(u).value();
      s->using_io_uring_ = true;
      return s;
    }
    std::fprintf(stderr,
                 "%s: io_uring unavailable (%s); serving with poll and a "
                 "thread per connection instead\n",
                 o.log_name.c_str(), u.status().ToString().c_str());
  } else {
    std::fprintf(stderr,
                 "%s: io_uring disabled by option; serving with poll and a "
                 "thread per connection\n",
                 o.log_name.c_str());
  }
  STRIPEFS_ASSIGN_OR_RETURN(
      s->loop_, PollServerLoop::Start(s->core_.get(), s->listen_fd_.get()));
  return s;
}

RpcServer::~RpcServer() { Stop(); }

size_t RpcServer::CloseSessionsOf(const std::string& entity) {
  return core_ ? core_->CloseSessionsOf(entity) : 0;
}

RpcServerCounters RpcServer::counters() const { return core_->Counters(); }

void RpcServer::Stop() {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (loop_) loop_->Stop();
  loop_.reset();
  listen_fd_.Reset();
}

}  // namespace stripefs::rpc

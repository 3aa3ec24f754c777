#include "backend/rpc/rpc_server.h"

#include <cstdio>

#include "backend/rpc/poll_server_loop.h"
#include "backend/rpc/server_core.h"
#include "backend/rpc/uring_server_loop.h"

namespace stripefs::rpc {

Result<std::unique_ptr<RpcServer>> RpcServer::Start(
    RpcServerOptions options, std::shared_ptr<const ClusterKey> key,
    RpcHandler* handler) {
  if (!key) return Status::InvalidArgument("RpcServer needs a cluster key");
  if (options.max_connections == 0)
    return Status::InvalidArgument("RpcServer max_connections must be >= 1");
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

RpcServerCounters RpcServer::counters() const { return core_->Counters(); }

void RpcServer::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (loop_) loop_->Stop();
  loop_.reset();
  listen_fd_.Reset();
}

}  // namespace stripefs::rpc

#include "backend/rpc/client_lease.h"

#include <unistd.h>

#include <random>

namespace stripefs::rpc {
namespace {

RpcClientOptions LeaseOptions(std::chrono::milliseconds interval) {
  RpcClientOptions o = RemoteMetaService::DefaultOptions();
  o.call_timeout = interval;
  o.connect_timeout = std::min(interval, std::chrono::milliseconds(1000));
  o.max_idle_connections = 1;
  return o;
}

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "?";
  return host;
}

}  // namespace

ClientLease::ClientLease(const std::string& meta_address,
                         std::shared_ptr<const ClusterKey> key,
                         std::string kind, const std::string& description,
                         std::chrono::milliseconds interval)
    : meta_(meta_address, std::move(key), LeaseOptions(interval)),
      interval_(interval) {
  std::random_device rd;
  record_.id = (uint64_t{rd()} << 32) ^ rd();
  record_.kind = std::move(kind);
  record_.description = HostName() + " pid " + std::to_string(::getpid()) +
                        (description.empty() ? "" : " " + description);
  record_.lease_ms = static_cast<uint32_t>(3 * interval.count());
  Send(false);
  thread_ = std::thread([this] { Loop(); });
}

ClientLease::~ClientLease() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  Send(true);
}

void ClientLease::Update(const RepairReport& progress) {
  std::lock_guard lock(mu_);
  record_.repair = progress;
}

void ClientLease::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (cv_.wait_for(lock, interval_, [&] { return stopping_; })) break;
    lock.unlock();
    Send(false);
    lock.lock();
  }
}

void ClientLease::Send(bool finished) {
  ClientRecord r;
  {
    std::lock_guard lock(mu_);
    r = record_;
  }
  r.finished = finished;
  (void)meta_.ClientHeartbeat(r);  // best effort (header)
}

}  // namespace stripefs::rpc

#include "backend/rpc/chunk_prober.h"

namespace stripefs {

Status ChunkProber::Probe(const ServerInfo& info,
                          std::chrono::milliseconds timeout) {
  std::shared_ptr<rpc::RemoteChunkService> service;
  {
    MutexLock lock(&mu_);
    Stub& s = stubs_[info.id];
    if (!s.service || s.address != info.address || s.timeout != timeout) {
      rpc::RpcClientOptions o = rpc::RemoteChunkService::DefaultOptions();
      o.call_timeout = timeout;
      o.connect_timeout = timeout;
      o.max_idle_connections = 1;
      o.expected_server = {rpc::ServerRole::kChunkd, info.id, volume_};
      s.service =
          std::make_shared<rpc::RemoteChunkService>(info.address, key_, o);
      s.address = info.address;
      s.timeout = timeout;
    }
    service = s.service;
  }
  auto role = service->Ping();
  if (!role.ok()) return role.status();
  if (*role != "chunkd") {
    return Status(EPROTO, "the server at " + info.address + " answers as '" +
                              *role + "', not chunkd (address reused?)");
  }
  return Status::Ok();
}

}  // namespace stripefs

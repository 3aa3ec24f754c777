#include "backend/client/remote_chunk_servers.h"

namespace stripefs {

ChunkService* RemoteChunkServers::Get(const ServerInfo& info) {
  if (info.address.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = current_[info.id];
  if (e.stub == nullptr || e.address != info.address) {
    // The handshake checks that the address reaches this very server.
    rpc::RpcClientOptions o = rpc::RemoteChunkService::DefaultOptions();
    o.expected_server = {rpc::ServerRole::kChunkd, info.id, volume_};
    stubs_.push_back(std::make_unique<rpc::RemoteChunkService>(
        info.address, key_, o, read_timeout_, grants_.get()));
    e.address = info.address;
    e.stub = stubs_.back().get();
  }
  return e.stub;
}

}  // namespace stripefs

// MetaStore: the volume's geometry, the cluster map (chunk servers, their
// states and the map epoch) and the metads' leader lease. Every change is
// one durable transaction on the M cluster / M leader record.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "backend/meta/meta_store.h"
#include "backend/meta/meta_store_mutation.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)

Result<Geometry> MetaStore::GetGeometry() { return geometry_; }

Result<ClusterMap> MetaStore::GetClusterMap() {
  STRIPEFS_ASSIGN_OR_RETURN(std::string v,
                            Get(MetaKey(kMetaCluster), "cluster map"));
  return DecodeClusterMap(v);
}

namespace {

Result<ClusterMap> ReadClusterMap(KvReader& r) {
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                            r.Get(MetaKey(kMetaCluster)));
  if (!v) return Status::NotFound("cluster map does not exist");
  return DecodeClusterMap(*v);
}

}  // namespace

Status MetaStore::UpsertServer(const ServerInfo& info) {
  if (info.address.size() > 4096 || info.failure_domain.size() > 4096) {
    return Status::InvalidArgument(
        "server address or failure domain longer "
        "than 4096 bytes");
  }
  if (info.state > ServerState::kOut) {
    return Status::InvalidArgument("unknown server state");
  }
  if (info.weight > kMaxServerWeight) {
    return Status::InvalidArgument("server weight over " +
                                   std::to_string(kMaxServerWeight));
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(ClusterMap map, ReadClusterMap(m.txn()));
    auto it =
        std::find_if(map.servers.begin(), map.servers.end(),
                     [&](const ServerInfo& s) { return s.id >= info.id; });
    if (it != map.servers.end() && it->id == info.id) {
      *it = info;
    } else {
      map.servers.insert(it, info);
    }
    map.epoch++;
    m.txn().Put(MetaKey(kMetaCluster), EncodeClusterMap(map));
    return m.Commit();
  });
}

Status MetaStore::SetServerState(uint32_t id, ServerState state) {
  if (state > ServerState::kOut) {
    return Status::InvalidArgument("unknown server state");
  }
  return Mutate([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(ClusterMap map, ReadClusterMap(m.txn()));
    auto it = std::find_if(map.servers.begin(), map.servers.end(),
                           [&](const ServerInfo& s) { return s.id == id; });
    if (it == map.servers.end()) {
      return Status::NotFound("server " + std::to_string(id) +
                              " is not in the cluster map (add it first)");
    }
    if (it->state == state) return Status::Ok();
    it->state = state;
    map.epoch++;
    m.txn().Put(MetaKey(kMetaCluster), EncodeClusterMap(map));
    return m.Commit();
  });
}

Result<bool> MetaStore::SetServerStateIf(const ServerInfo& seen,
                                         ServerState state) {
  if (state > ServerState::kOut) {
    return Status::InvalidArgument("unknown server state");
  }
  return Mutate([&]() -> Result<bool> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(ClusterMap map, ReadClusterMap(m.txn()));
    auto it =
        std::find_if(map.servers.begin(), map.servers.end(),
                     [&](const ServerInfo& s) { return s.id == seen.id; });
    if (it == map.servers.end() || !(*it == seen) || it->state == state) {
      return false;
    }
    it->state = state;
    map.epoch++;
    m.txn().Put(MetaKey(kMetaCluster), EncodeClusterMap(map));
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return true;
  });
}

Result<bool> MetaStore::HoldLeadership(const std::string& holder,
                                       std::chrono::milliseconds ttl) {
  if (holder.empty() || holder.size() > 4096 || ttl.count() <= 0) {
    return Status::InvalidArgument(
        "leader lease needs a holder name (1..4096 bytes) and a positive ttl");
  }
  return Mutate([&]() -> Result<bool> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> v,
                              m.txn().Get(MetaKey(kMetaLeader)));
    const uint64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count();
    if (v) {
      STRIPEFS_ASSIGN_OR_RETURN(LeaderLease cur, DecodeLeaderLease(*v));
      if (cur.holder != holder && cur.expires_ms > now) return false;
    }
    m.txn().Put(MetaKey(kMetaLeader),
                EncodeLeaderLease({holder, now + ttl.count()}));
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return true;
  });
}

}  // namespace stripefs

// The etcd engine of the KvStore seam: a volume's records in an etcd v3
// cluster (Raft-replicated), under one key prefix, reached over gRPC.
//
// A location is "etcd://host:port[,host:port...]/prefix[?timeout_ms=N]".
// Every record key is stored as prefix + key, so one etcd holds many
// volumes. Any number of EtcdKv instances (in any processes) may use the
// same prefix at once: transactions are optimistic (etcd Txn comparing the
// mod revisions of what was read; see kv_store.h).
//
// Failover and time bounds: each call goes to one endpoint and moves to the
// next when that one is unreachable or has lost its leader, retrying until
// timeout_ms (default 10000) has passed; then it fails with ETIMEDOUT, never
// hangs. A commit whose answer was lost (e.g. the leader died mid-call) is
// resolved by reading back a marker key the transaction wrote, so a commit
// is never applied twice nor reported failed after it applied.
//
// Limits: a transaction holds at most 127 writes (etcd's default 128, one
// for the marker) and 128 compares; larger ones fail with EFBIG. Reads are
// paged (1000 keys per request), so a range of any size can be scanned.
//
// Built only when gRPC, protobuf and etcd's .proto files are found
// (CMake option STRIPEFS_ETCD); otherwise ConnectEtcd returns ENOTSUP with
// the reason. Thread-safety: as KvStore.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/meta/kv_store.h"
#include "common/status.h"

namespace stripefs {

inline constexpr std::string_view kEtcdScheme = "etcd://";

struct EtcdLocation {
  std::vector<std::string> endpoints;  // host:port, at least one
  std::string prefix;                  // key prefix, not empty
  std::chrono::milliseconds timeout{10000};
};

// Parses "etcd://h:p[,h:p...]/prefix[?timeout_ms=N]" (EINVAL naming the
// mistake otherwise).
Result<EtcdLocation> ParseEtcdLocation(std::string_view location);

// Connects (lazily: the first call reaches out) to the etcd of `where`.
Result<std::unique_ptr<KvStore>> ConnectEtcd(const EtcdLocation& where);

// Why the etcd engine is not built, or empty if it is.
std::string_view EtcdEngineMissing();

}  // namespace stripefs

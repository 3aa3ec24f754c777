// gRPC channels to etcd members, shared by the etcd engine (etcd_kv.cc) and
// the administration calls (etcd_admin.cc). Built only with the etcd engine.
// Stateless; thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "backend/meta/etcd_kv.h"

namespace stripefs {

// A channel to `endpoint` (host:port): TLS with the client certificate when
// `pem` is set (the member's certificate must name the host), plaintext
// otherwise. Unlimited receive size (pages are bounded by the caller).
std::shared_ptr<grpc::Channel> EtcdChannel(
    const std::string& endpoint, const std::optional<EtcdTlsPem>& pem);

// Whether an etcd answer is worth sending again (to the next member, until
// the caller's deadline): no connection, no leader, leader changed, timed
// out. A request whose deadline runs out inside etcd can come back as
// UNKNOWN "context deadline exceeded" (the Go context error, not a gRPC
// status) instead of our own DEADLINE_EXCEEDED, whichever wins the race: it
// is the same timeout, so it is retryable too, never a final I/O error.
bool EtcdRetryable(const grpc::Status& s);

}  // namespace stripefs

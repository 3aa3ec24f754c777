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

}  // namespace stripefs

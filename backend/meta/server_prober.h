// ServerProber: asks one chunk server "are you alive?" with a deadline.
// The interface the HealthMonitor (metad) probes through; the RPC layer
// implements it with a Ping (backend/rpc/chunk_prober.h), tests with fakes.
//
// Thread-safety: Probe() is called from several threads at once (one per
// server in a probe round); implementations must allow that.
#pragma once

#include <chrono>

#include "backend/meta/meta_types.h"
#include "common/status.h"

namespace stripefs {

class ServerProber {
 public:
  virtual ~ServerProber() = default;
  // Ok when the server at info.address answered within `timeout`; otherwise
  // the error (EHOSTDOWN unreachable, ETIMEDOUT no answer in time, ...).
  // Must return within about `timeout` (plus scheduling noise).
  virtual Status Probe(const ServerInfo& info,
                       std::chrono::milliseconds timeout) = 0;
};

}  // namespace stripefs

// Transport: moves FUSE requests from the kernel to the Session and replies
// back. Implementations: DevTransport (read/writev on /dev/fuse, a worker
// pool) and UringTransport (FUSE-over-io-uring, one pinned queue per CPU).
//
// A transport owns its threads and buffers; it does not own the /dev/fuse
// fd (FuseMount does). For each request it builds an InFlight (replier.h)
// and calls RequestSink::Dispatch; the InFlight replies through the same
// transport. Start/Stop/Join are called from one controlling thread; Stop()
// only signals (eventfd) and may be called from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"
#include "fuse/replier.h"

namespace stripefs::fuse {

// Receives raw requests from a transport (implemented by Session).
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // One request: header + fixed args + rest (see request_parser.h). The
  // sink takes over `inflight` (it must Complete() it, or drop it for
  // no-reply opcodes via DropNoReply). Bytes stay valid until Complete.
  virtual void Dispatch(InFlight* inflight, const fuse_abi::fuse_in_header& h,
                        std::span<const uint8_t> arg0,
                        std::span<const uint8_t> rest) = 0;
  // The transport stopped because the connection ended (ENODEV/unmount)
  // or failed (status says why).
  // A whole buffer read from /dev/fuse (header included); the sink
  // validates and splits it.
  virtual void DispatchDevBuffer(InFlight* inflight,
                                 std::span<const uint8_t> buf) = 0;
  virtual void TransportEnded(std::string_view transport, Status why) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  virtual Status Start(RequestSink* sink) = 0;
  // Asks threads to finish (async-signal-safe: eventfd write only).
  virtual void Stop() = 0;
  // Waits for all threads; after Join no callback runs any more.
  virtual void Join() = 0;
  virtual int queue_count() const = 0;
};

// A no-reply request (FORGET) done: frees transport resources without
// writing anything to the kernel. Implemented by InFlight::Complete with
// this sentinel error value.
inline constexpr int kNoReply = -1;

}  // namespace stripefs::fuse

// OutboundMessage: one reply, reject frame or handshake message on its way
// out of a UringServerLoop connection. The buffers (sealed header and tag,
// reply payload and bulk, or the ciphertext of a secure reply) stay here,
// at a stable address, until the last byte is sent; the gather list over
// them shrinks as partial sends consume it.
//
// Ownership: owns its buffers (a pooled reply bulk through RpcReply's
// lease). Thread-safety: none; built by a worker or the ring thread, then
// used by the ring thread only. Internal to backend/rpc.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/rpc/frame.h"
#include "backend/rpc/rpc_server.h"

namespace stripefs::rpc {

struct OutboundMessage {
  // A reject frame for `why` (its tag is zero and unchecked).
  static std::unique_ptr<OutboundMessage> Reject(FrameError why);
  // A handshake message: `bytes` as they are, no frame around them.
  static std::unique_ptr<OutboundMessage> Raw(std::span<const uint8_t> bytes);

  // Lays the gather list over the buffers; call once they are final.
  void BuildIov();
  // The not yet sent part, for one sendmsg (valid until the next call).
  msghdr* Unsent();
  // Consumes `n` sent bytes; true when everything is sent.
  bool Advance(size_t n);

  FrameSeal seal{};
  RpcReply reply;
  std::vector<uint8_t> ciphertext;  // a secure reply's body (seal.body)
  bool raw = false;                 // handshake message: reply.payload only

 private:
  static constexpr int kMaxIov = 4;  // header, payload, bulk, tag
  iovec iov_[kMaxIov];
  int iovcnt_ = 0;
  int first_ = 0;  // first iovec not fully sent
  msghdr msg_{};
};

}  // namespace stripefs::rpc

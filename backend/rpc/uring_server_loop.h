// UringServerLoop: the default RpcServer loop. One thread owns an io_uring
// and does all socket I/O of the server; a bounded pool of worker threads
// verifies frames (Poly1305 tag with the connection's receive cipher), runs the
// handler and seals the reply (send cipher), so neither hashing of large
// frames nor blocking handlers run on the ring. The session handshake runs
// on the ring thread with a fixed-size state per connection; nothing else is
// allocated for a connection until its client has proven the cluster key.
//
// Inline requests: a frame of at most kMaxInlineFrameBytes is verified on
// the ring thread; if it is a Ping or the handler's InlineSafe() says so, it
// is also handled and sealed there and its reply queued for sending: no
// worker wake-up and no eventfd wake-up back (the two hand-offs cost more
// than a small metad handler). Otherwise the verified frame goes to a
// worker as before. A bad tag gets the same count, log line, reject frame
// and close either way. Inline handling runs only when the connection has
// no request with a worker, and each pass over a connection answers at most
// kMaxQueuedReplies requests inline before its replies must be sent, so a
// client flooding cheap requests gets a bounded share of the ring thread
// (one pass per completion, in completion order with everyone else's).
//
// Ring thread: multishot accept on the listener (re-armed single accepts if
// the kernel refuses multishot); per connection one recv at a time into a
// FrameAssembler (header bounds-checked before any allocation, bulk received
// straight into its vector), one sendmsg at a time with a gather list
// (header, payload, the handler's bulk buffer, tag: no copy of chunk data),
// partial sends continued, each send linked to a 60 s timeout; an eventfd
// read wakes it for finished handler calls and Stop(); a periodic timeout
// closes connections past their handshake, header or idle timeout, and
// accept applies the per-IP / pending limits (ConnectionLimits), evicting the
// oldest pending connection rather than refusing a new one.
//
// Per connection at most one request is in the worker pool and at most a few
// frames are read ahead, so replies leave in request order and a client that
// never reads its replies only stalls itself. Frame errors are counted and
// logged (ServerCore), answered with a reject frame after the replies already
// due, then the connection is closed.
//
// Ownership: borrows the ServerCore and the listening fd (both outlive the
// loop); owns the ring, eventfd, workers and connection fds.
// Thread-safety: Stop() may be called from any thread, once.
#pragma once

#include <memory>

#include "backend/rpc/server_core.h"
#include "common/status.h"

namespace stripefs::rpc {

class UringServerLoop : public ServerLoop {
 public:
  // Sets the ring up on its own thread and starts serving; an error (the
  // io_uring_setup errno) means the caller should fall back to poll.
  static Result<std::unique_ptr<UringServerLoop>> Start(ServerCore* core,
                                                        int listen_fd);
  ~UringServerLoop() override;
  void Stop() override;

  struct Impl;

 private:
  explicit UringServerLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stripefs::rpc

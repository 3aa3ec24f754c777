// DevTransport: the classic /dev/fuse transport.
//
// A pool of worker threads; each reads whole requests into its own buffer
// (sized for max_pages * 4096 + headers), dispatches them to the
// RequestSink, and replies with one writev (header + struct + payload, no
// copy of READ data). A request answered later (asynchronously) keeps its
// buffer until the reply; the worker takes a fresh one meanwhile.
//
// The fd is switched to O_NONBLOCK; workers poll() it together with the
// session's stop eventfd, so Stop() (eventfd write) wakes them all. read()
// ENODEV = unmounted/aborted -> clean stop; ENOENT on writev = request was
// interrupted/aborted -> tolerated.
//
// Join() also waits until every request handed out was completed (the file
// system may answer asynchronously), so no reply can touch a dead transport.
// Owns its threads and buffers, not the fds. Thread-safe as a Transport.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fuse/transport.h"

namespace stripefs::fuse {

struct DevTransportOptions {
  int threads = 2;
  size_t buffer_size = (256 + 1) * 4096;  // >= max request incl. headers
  int first_queue = 0;                    // queue index of worker 0 in counters
};

class DevTransport : public Transport {
 public:
  // `fuse_fd` and `stop_fd` (eventfd, readable = stop) are not owned.
  DevTransport(int fuse_fd, int stop_fd, DevTransportOptions opts);
  ~DevTransport() override;

  std::string_view name() const override { return "dev"; }
  Status Start(RequestSink* sink) override;
  void Stop() override;
  void Join() override;
  int queue_count() const override { return opts_.threads; }

  // Buffer pool (shared by workers and async replies).
  std::unique_ptr<uint8_t[]> TakeBuffer();
  void ReturnBuffer(std::unique_ptr<uint8_t[]> buf);
  // Sends one reply (header filled here); returns errno (0 ok, ENOENT ok).
  int WriteReply(uint64_t unique, int error, std::span<const iovec> payload);
  size_t buffer_size() const { return opts_.buffer_size; }
  std::atomic<uint64_t>& reply_enoent() { return reply_enoent_; }
  // Requests handed to the sink and not completed yet.
  std::atomic<int>& outstanding() { return outstanding_; }

 private:
  void Worker(int index);

  int fd_;
  int stop_fd_;
  DevTransportOptions opts_;
  RequestSink* sink_ = nullptr;
  std::vector<std::thread> threads_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<uint8_t[]>> pool_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> running_{0};
  std::atomic<uint64_t> reply_enoent_{0};
  std::atomic<int> outstanding_{0};
};

}  // namespace stripefs::fuse

#include "fuse/dev_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "fuse/request_parser.h"

namespace stripefs::fuse {

using namespace fuse_abi;  // NOLINT

namespace {

// One /dev/fuse request in flight: owns the buffer it was read into until
// the reply is written.
class DevInFlight final : public InFlight {
 public:
  DevInFlight(DevTransport* t, std::unique_ptr<uint8_t[]> buf)
      : t_(t), buf_(std::move(buf)) {
    t_->outstanding().fetch_add(1);
  }

  void Complete(int error, std::span<const iovec> payload) override {
    DevTransport* t = t_;
    if (error != kNoReply) t->WriteReply(ctx.unique, error, payload);
    t->ReturnBuffer(std::move(buf_));
    if (scratch_) t->ReturnBuffer(std::move(scratch_));
    delete this;
    t->outstanding().fetch_sub(1);  // last touch of the transport
  }

  std::span<uint8_t> ScratchBuffer(size_t n) override {
    if (n > t_->buffer_size()) return {};
    if (!scratch_) scratch_ = t_->TakeBuffer();
    return {scratch_.get(), n};
  }

  uint8_t* data() { return buf_.get(); }

 private:
  DevTransport* t_;
  std::unique_ptr<uint8_t[]> buf_;
  std::unique_ptr<uint8_t[]> scratch_;
};

}  // namespace

DevTransport::DevTransport(int fuse_fd, int stop_fd, DevTransportOptions opts)
    : fd_(fuse_fd), stop_fd_(stop_fd), opts_(opts) {
  if (opts_.threads < 1) opts_.threads = 1;
  if (opts_.buffer_size < kMinReadBuffer) opts_.buffer_size = kMinReadBuffer;
}

DevTransport::~DevTransport() {
  Stop();
  Join();
}

std::unique_ptr<uint8_t[]> DevTransport::TakeBuffer() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      auto b = std::move(pool_.back());
      pool_.pop_back();
      return b;
    }
  }
  return std::unique_ptr<uint8_t[]>(new uint8_t[opts_.buffer_size]);
}

void DevTransport::ReturnBuffer(std::unique_ptr<uint8_t[]> buf) {
  if (!buf) return;
  std::lock_guard<std::mutex> lock(pool_mu_);
  // Keep a few spare buffers; free the rest.
  if (pool_.size() < static_cast<size_t>(opts_.threads) * 2 + 4) {
    pool_.push_back(std::move(buf));
  }
}

int DevTransport::WriteReply(uint64_t unique, int error,
                             std::span<const iovec> payload) {
  iovec iov[16];
  fuse_out_header oh{};
  size_t n = 1;
  size_t len = sizeof(oh);
  if (error == 0) {
    for (const iovec& v : payload) {
      if (v.iov_len == 0) continue;
      if (n == sizeof(iov) / sizeof(iov[0])) {
        error = EIO;  // too many pieces; never happens with our Replier
        break;
      }
      iov[n++] = v;
      len += v.iov_len;
    }
  }
  if (error != 0) {
    n = 1;
    len = sizeof(oh);
  }
  oh.len = static_cast<uint32_t>(len);
  oh.error = -error;
  oh.unique = unique;
  iov[0] = iovec{&oh, sizeof(oh)};
  for (;;) {
    ssize_t w = ::writev(fd_, iov, static_cast<int>(n));
    if (w >= 0) return 0;
    if (errno == EINTR) continue;
    int err = errno;
    if (err == ENOENT) {
      // The request was interrupted/aborted meanwhile: fine.
      reply_enoent_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    if (err != ENODEV) {
      std::fprintf(stderr, "stripefs-fuse: reply to unique=%llu failed: %s\n",
                   static_cast<unsigned long long>(unique), std::strerror(err));
    }
    return err;
  }
}

Status DevTransport::Start(RequestSink* sink) {
  sink_ = sink;
  int fl = ::fcntl(fd_, F_GETFL);
  if (fl < 0 || ::fcntl(fd_, F_SETFL, fl | O_NONBLOCK) < 0) {
    return Status::FromErrno(errno, "cannot make /dev/fuse fd non-blocking");
  }
  running_.store(opts_.threads);
  for (int i = 0; i < opts_.threads; ++i) {
    threads_.emplace_back([this, i] { Worker(i); });
  }
  return Status::Ok();
}

void DevTransport::Stop() {
  stopping_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(stop_fd_, &one, sizeof(one));
}

void DevTransport::Join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  // Requests the file system still holds (asynchronous replies) reference
  // this transport: wait for them.
  auto start = std::chrono::steady_clock::now();
  bool warned = false;
  while (outstanding_.load() > 0) {
    if (!warned &&
        std::chrono::steady_clock::now() - start > std::chrono::seconds(5)) {
      std::fprintf(stderr,
                   "stripefs-fuse: waiting for %d request(s) the file system "
                   "has not answered yet\n",
                   outstanding_.load());
      warned = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void DevTransport::Worker(int index) {
  Status why;
  std::unique_ptr<uint8_t[]> buf = TakeBuffer();
  for (;;) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int pr = ::poll(p, 2, -1);
    if (pr < 0) {
      if (errno == EINTR) continue;
      why = Status::FromErrno(errno, "poll on /dev/fuse");
      break;
    }
    if (p[1].revents & POLLIN) break;               // Stop()
    if (p[0].revents & (POLLERR | POLLHUP)) break;  // connection gone
    if (!(p[0].revents & POLLIN)) continue;
    ssize_t n = ::read(fd_, buf.get(), opts_.buffer_size);
    if (n < 0) {
      int err = errno;
      if (err == EAGAIN || err == EINTR || err == ENOENT) continue;
      if (err == ENODEV || err == ECONNABORTED) break;  // unmounted/aborted
      why = Status::FromErrno(err, "reading /dev/fuse");
      break;
    }
    auto* f = new DevInFlight(this, std::move(buf));
    f->ctx.queue = opts_.first_queue + index;
    f->ctx.cpu = sched_getcpu();
    f->ctx.uring = false;
    sink_->DispatchDevBuffer(
        f, std::span<const uint8_t>(f->data(), static_cast<size_t>(n)));
    buf = TakeBuffer();
  }
  ReturnBuffer(std::move(buf));
  if (running_.fetch_sub(1) == 1) {
    sink_->TransportEnded("dev", why);
  }
}

}  // namespace stripefs::fuse

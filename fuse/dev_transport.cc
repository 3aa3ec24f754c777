#include "fuse/dev_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "fuse/request_parser.h"

namespace stripefs::fuse {

using namespace fuse_abi;  // NOLINT

namespace {

// One /dev/fuse request in flight: owns the buffer it was read into until
// the reply is written.
class DevInFlight final : public InFlight {
 public:
  DevInFlight(DevTransport* t, BufferPool::Lease buf)
      : t_(t), buf_(std::move(buf)) {
    t_->outstanding().fetch_add(1);
  }

  void Complete(int error, std::span<const iovec> payload) override {
    DevTransport* t = t_;
    if (error != kNoReply) t->WriteReply(ctx.unique, error, payload);
    delete this;                    // gives the buffers back (unless kept)
    t->outstanding().fetch_sub(1);  // last touch of the transport
  }

  std::span<uint8_t> ScratchBuffer(size_t n) override {
    if (n > t_->buffer_size()) return {};
    if (scratch_.empty()) scratch_ = t_->TakeBuffer();
    return {scratch_.data(), n};
  }

  BufferPool::Lease KeepRequestBuffer() override { return t_->Keep(buf_); }

  uint8_t* data() { return buf_.data(); }

 private:
  DevTransport* t_;
  BufferPool::Lease buf_;
  BufferPool::Lease scratch_;
};

void NoopWakeHandler(int) {}

// Installs the no-op handler of the wake signal (once per process; never
// removed: it does nothing). False if the signal has someone else's handler.
bool EnsureWakeHandler() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  struct sigaction cur {};
  if (::sigaction(DevWakeSignal(), nullptr, &cur) != 0) return false;
  if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == NoopWakeHandler)
    return true;
  if ((cur.sa_flags & SA_SIGINFO) ||
      (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN))
    return false;
  struct sigaction sa {};
  sa.sa_handler = NoopWakeHandler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read() returns EINTR
  return ::sigaction(DevWakeSignal(), &sa, nullptr) == 0;
}

}  // namespace

int DevWakeSignal() { return SIGRTMIN + 5; }

DevTransport::DevTransport(int fuse_fd, int stop_fd, DevTransportOptions opts)
    : fd_(fuse_fd),
      stop_fd_(stop_fd),
      opts_(Clamped(opts)),
      // Keep a few spare buffers; free the rest.
      pool_(opts_.buffer_size, static_cast<size_t>(opts_.threads) * 2 + 4,
            kWritePayloadOffset) {}

DevTransportOptions DevTransport::Clamped(DevTransportOptions o) {
  if (o.threads < 1) o.threads = 1;
  if (o.buffer_size < kMinReadBuffer) o.buffer_size = kMinReadBuffer;
  return o;
}

DevTransport::~DevTransport() {
  Stop();
  Join();
}

BufferPool::Lease DevTransport::Keep(BufferPool::Lease& buf) {
  // Out now: each worker's buffer (this request's among them), requests
  // in flight, kept ones.
  const size_t limit =
      static_cast<size_t>(opts_.threads) + opts_.max_kept_buffers;
  if (buf.empty() || pool_.outstanding() >= limit) {
    keep_refused_.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  kept_.fetch_add(1, std::memory_order_relaxed);
  return std::move(buf);
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
  if (opts_.wait == DevWait::kBlockingRead && !EnsureWakeHandler()) {
    std::fprintf(stderr,
                 "stripefs-fuse: signal %d has a foreign handler; /dev/fuse "
                 "workers poll instead of blocking reads (every request "
                 "wakes every idle worker)\n",
                 DevWakeSignal());
    opts_.wait = DevWait::kPoll;
  }
  int fl = ::fcntl(fd_, F_GETFL);
  int want =
      opts_.wait == DevWait::kPoll ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
  if (fl < 0 || (want != fl && ::fcntl(fd_, F_SETFL, want) < 0)) {
    return Status::FromErrno(errno, "cannot set the /dev/fuse fd's O_NONBLOCK");
  }
  running_.store(opts_.threads);
  tids_.reset(new std::atomic<int>[opts_.threads]);
  for (int i = 0; i < opts_.threads; ++i) tids_[i].store(0);
  for (int i = 0; i < opts_.threads; ++i) {
    threads_.emplace_back([this, i] { Worker(i); });
    handles_.push_back(threads_.back().native_handle());
  }
  if (opts_.wait == DevWait::kBlockingRead) {
    stopper_ = std::thread([this] { Stopper(); });
  }
  return Status::Ok();
}

void DevTransport::Stop() {
  stopping_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(stop_fd_, &one, sizeof(one));
}

void DevTransport::Join() {
  if (stopper_.joinable()) {
    // The stopper leaves once every worker left its loop (it may still be
    // signalling them, so it goes before the workers are joined).
    Stop();
    stopper_.join();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  handles_.clear();
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

uint64_t DevTransport::worker_sleeps() const {
  if (!tids_) return 0;
  uint64_t sum = 0;
  for (int i = 0; i < opts_.threads; ++i) {
    const int tid = tids_[i].load();
    if (tid == 0) continue;
    std::string path = "/proc/self/task/" + std::to_string(tid) + "/status";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;  // exited
    char line[256];
    unsigned long long v = 0;
    while (std::fgets(line, sizeof(line), f)) {
      if (std::sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1) {
        sum += v;
        break;
      }
    }
    std::fclose(f);
  }
  return sum;
}

void DevTransport::Stopper() {
  pthread_setname_np(pthread_self(), "fuse-dev-stop");
  pollfd p{stop_fd_, POLLIN, 0};
  while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  stopping_.store(true);
  // A worker between two reads misses the signal but sees stopping_ before
  // its next read; one blocked in read() gets EINTR. Repeat until all left.
  while (running_.load() > 0) {
    for (pthread_t h : handles_) pthread_kill(h, DevWakeSignal());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void DevTransport::Worker(int index) {
  tids_[index].store(static_cast<int>(::gettid()));
  std::string name = "fuse-dev/" + std::to_string(index);
  pthread_setname_np(pthread_self(), name.c_str());
  if (opts_.wait == DevWait::kBlockingRead) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, DevWakeSignal());
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
  Status why;
  BufferPool::Lease buf = TakeBuffer();
  for (;;) {
    if (opts_.wait == DevWait::kPoll) {
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
    } else if (stopping_.load()) {
      break;  // Stop(): the stopper interrupts reads until we get here
    }
    ssize_t n = ::read(fd_, buf.data(), opts_.buffer_size);
    if (n < 0) {
      int err = errno;
      if (err == EAGAIN || err == EINTR) {
        if (!stopping_.load()) {
          empty_wakes_.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      if (err == ENOENT) continue;
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
  buf.reset();
  if (running_.fetch_sub(1) == 1) {
    sink_->TransportEnded("dev", why);
  }
}

}  // namespace stripefs::fuse

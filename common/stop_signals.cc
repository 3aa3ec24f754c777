#include "common/stop_signals.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace stripefs {
namespace {

// Handler state: lock-free atomics and an fd, all the handler may touch.
std::atomic<int> g_received{0};
std::atomic<int> g_last{0};
int g_signal_fd = -1;
std::atomic<bool> g_installed{false};

void OnSignal(int sig) {
  g_last.store(sig);
  g_received.fetch_add(1);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(g_signal_fd, &one, sizeof(one));
}

// Waits until `fd` is readable; false if `quit_fd` (when >= 0) woke first.
bool WaitReadable(int fd, int quit_fd) {
  pollfd p[2] = {{fd, POLLIN, 0}, {quit_fd, POLLIN, 0}};
  const nfds_t n = quit_fd >= 0 ? 2 : 1;
  for (;;) {
    int r = ::poll(p, n, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (n == 2 && (p[1].revents & POLLIN)) return false;
    if (p[0].revents & POLLIN) return true;
  }
}

}  // namespace

Result<std::unique_ptr<StopSignals>> StopSignals::Install(
    std::initializer_list<int> signals) {
  if (g_installed.exchange(true))
    return Status::InvalidArgument("stop signals already installed");
  std::unique_ptr<StopSignals> s(new StopSignals());
  g_received.store(0);
  g_last.store(0);
  g_signal_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->quit_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g_signal_fd < 0 || s->quit_fd_ < 0)
    return Status::FromErrno(errno, "eventfd for stop signals");
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : signals) {
    struct sigaction old {};
    if (sigaction(sig, &sa, &old) != 0)
      return Status::FromErrno(
          errno, "installing a handler for signal " + std::to_string(sig));
    s->previous_.emplace_back(sig, old);
  }
  return s;
}

StopSignals::~StopSignals() {
  for (const auto& [sig, old] : previous_) sigaction(sig, &old, nullptr);
  CancelOnStop();
  if (quit_fd_ >= 0) ::close(quit_fd_);
  if (g_signal_fd >= 0) ::close(g_signal_fd);
  g_signal_fd = -1;
  g_installed.store(false);
}

int StopSignals::Wait() {
  (void)WaitReadable(g_signal_fd, -1);
  return g_last.load();
}

void StopSignals::OnStop(std::function<void(int)> fn) {
  CancelOnStop();
  helper_ = std::thread([fn = std::move(fn), quit = quit_fd_] {
    if (WaitReadable(g_signal_fd, quit)) fn(g_last.load());
  });
}

void StopSignals::CancelOnStop() {
  if (!helper_.joinable()) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(quit_fd_, &one, sizeof(one));
  helper_.join();
  // Drain the wake-up so a later OnStop waits again.
  uint64_t n = 0;
  [[maybe_unused]] ssize_t d = ::read(quit_fd_, &n, sizeof(n));
}

int StopSignals::received() const { return g_received.load(); }

}  // namespace stripefs

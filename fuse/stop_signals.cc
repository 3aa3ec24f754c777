#include "fuse/stop_signals.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "fuse/fuse_mount.h"
#include "fuse/session.h"

namespace stripefs::fuse {
namespace {

std::atomic<int> g_received{0};
int g_signal_fd = -1;  // written by the handler
int g_quit_fd = -1;    // written by RemoveStopSignals
struct sigaction g_old_int, g_old_term;
bool g_installed = false;
std::thread g_helper;

void OnSignal(int) {
  g_received.fetch_add(1);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(g_signal_fd, &one, sizeof(one));
}

void Helper(Session* session, std::string mountpoint) {
  pollfd p[2] = {{g_signal_fd, POLLIN, 0}, {g_quit_fd, POLLIN, 0}};
  for (;;) {
    int r = ::poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (p[1].revents & POLLIN)) return;
    if (p[0].revents & POLLIN) break;
  }
  if (!mountpoint.empty()) {
    Status st = UnmountPath(mountpoint, /*lazy=*/false);
    if (!st.ok()) {
      std::fprintf(stderr, "stripefs: %s; detaching lazily\n",
                   st.ToString().c_str());
      (void)UnmountPath(mountpoint, /*lazy=*/true);
    }
  }
  session->Stop();
}

}  // namespace

Status InstallStopSignals(Session* session, const std::string& mountpoint) {
  if (g_installed)
    return Status::InvalidArgument("stop signals already installed");
  g_received.store(0);
  g_signal_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_quit_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g_signal_fd < 0 || g_quit_fd < 0)
    return Status::FromErrno(errno, "eventfd");
  g_helper = std::thread(Helper, session, mountpoint);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGINT, &sa, &g_old_int) != 0 ||
      sigaction(SIGTERM, &sa, &g_old_term) != 0) {
    Status st = Status::FromErrno(errno, "installing SIGINT/SIGTERM handlers");
    g_installed = true;
    RemoveStopSignals();
    return st;
  }
  g_installed = true;
  return Status::Ok();
}

void RemoveStopSignals() {
  if (!g_installed) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(g_quit_fd, &one, sizeof(one));
  if (g_helper.joinable()) g_helper.join();
  ::close(g_signal_fd);
  ::close(g_quit_fd);
  g_signal_fd = g_quit_fd = -1;
  g_installed = false;
}

int StopSignalsReceived() { return g_received.load(); }

}  // namespace stripefs::fuse

#include "tools/readiness.h"

#include <systemd/sd-daemon.h>

#include <cstdio>
#include <cstring>

namespace stripefs::tools {
namespace {

void Notify(const std::string& state) {
  int rc = ::sd_notify(0, state.c_str());
  if (rc < 0)  // a systemd that cannot be told would wait for us and time out
    std::fprintf(stderr, "sd_notify(%s): %s\n", state.c_str(),
                 std::strerror(-rc));
}

}  // namespace

void NotifyReady(const std::string& status) {
  Notify("READY=1\nSTATUS=" + status);
}

void NotifyStopping() { Notify("STOPPING=1"); }

}  // namespace stripefs::tools

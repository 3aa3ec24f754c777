#include "fuse/stop_signals.h"

#include <memory>

#include "common/stop_signals.h"
#include "fuse/fuse_mount.h"
#include "fuse/session.h"

namespace stripefs::fuse {
namespace {

std::unique_ptr<StopSignals> g_stop;
int g_received_at_removal = 0;

}  // namespace

Status InstallStopSignals(Session* session, const std::string& mountpoint) {
  if (g_stop) return Status::InvalidArgument("stop signals already installed");
  STRIPEFS_ASSIGN_OR_RETURN(g_stop, StopSignals::Install());
  g_received_at_removal = 0;
  g_stop->OnStop([session, mountpoint](int) {
    if (!mountpoint.empty()) UnmountOrDetach(mountpoint);
    session->Stop();
  });
  return Status::Ok();
}

void RemoveStopSignals() {
  if (!g_stop) return;
  g_received_at_removal = g_stop->received();
  g_stop.reset();
}

int StopSignalsReceived() {
  return g_stop ? g_stop->received() : g_received_at_removal;
}

}  // namespace stripefs::fuse

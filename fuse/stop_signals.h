// Clean shutdown on SIGINT/SIGTERM for a process serving one Session (the
// memfs test mount, engine tests), over common/stop_signals.h.
//
// InstallStopSignals(&session, mountpoint): on the first stop signal a helper
// thread, while the session still serves (so dirty writeback data is flushed
// through it), unmounts `mountpoint` (lazily if busy), then calls
// Session::Stop(). The daemon's Session::Wait() returns and its FuseMount
// destructor closes the fd. With an empty mountpoint the helper only calls
// Stop(). RemoveStopSignals() restores the previous handlers and joins the
// helper. Process-global; one session at a time. fs::MountService does the
// same for stripefs mounts (plus a flush first).
#pragma once

#include <string>

#include "common/status.h"

namespace stripefs::fuse {

class Session;

Status InstallStopSignals(Session* session, const std::string& mountpoint = "");
void RemoveStopSignals();
// Number of stop signals received since InstallStopSignals.
int StopSignalsReceived();

}  // namespace stripefs::fuse

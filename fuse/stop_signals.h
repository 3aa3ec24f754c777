// Clean shutdown on SIGINT/SIGTERM for a daemon serving one Session.
//
// InstallStopSignals(&session, mountpoint) installs handlers that only write
// to an eventfd (async-signal-safe). A helper thread wakes up and, while the
// session still serves (so dirty writeback data is flushed through it),
// unmounts `mountpoint` (umount2 / fusermount3 -u; lazily if busy), then
// calls Session::Stop(). The daemon's Session::Wait() returns and its
// FuseMount destructor closes the fd. With an empty mountpoint the helper
// only calls Stop(). RemoveStopSignals() restores the previous handlers and
// joins the helper. Process-global; one session at a time.
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

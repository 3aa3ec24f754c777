// Readiness and stop notifications to systemd (sd_notify, Type=notify
// units in packaging/systemd/): READY=1 once a daemon serves (metad
// listening, chunkd registered, mount live), STOPPING=1 when it begins to
// stop, STATUS= lines for `systemctl status`. No-ops when NOTIFY_SOCKET is
// unset (not started by systemd). Thread-safe (sd_notify is).
#pragma once

#include <string>

namespace stripefs::tools {

void NotifyReady(const std::string& status);
void NotifyStopping();

}  // namespace stripefs::tools

// StopSignals: the one way a stripefs process learns it should stop
// (SIGINT, SIGTERM, optionally SIGHUP).
//
// Install() sets process-wide handlers that only count the signal and write
// to an eventfd (async-signal-safe), so it works whatever threads already
// exist and whatever their signal masks (do not block the signals). Then
// either Wait() blocks the caller until the first stop signal (daemons), or
// OnStop(fn) runs fn once on a helper thread when it arrives (a mount: the
// helper unmounts while the session still serves). CancelOnStop() and the
// destructor join the helper; fn never runs after them. The destructor also
// restores the previous handlers.
// Process-global: one StopSignals at a time (Install fails otherwise).
// received() may be read from any thread; the rest from the owner's thread.
#pragma once

#include <signal.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <thread>
#include <vector>

#include "common/status.h"

namespace stripefs {

class StopSignals {
 public:
  static Result<std::unique_ptr<StopSignals>> Install(
      std::initializer_list<int> signals = {SIGINT, SIGTERM});
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until a stop signal has arrived (at once if one already did);
  // returns the number of the latest one.
  int Wait();
  // Runs fn(signal) once on a helper thread when the first stop signal
  // arrives (at once if one already did). Not together with Wait().
  void OnStop(std::function<void(int)> fn);
  // Stops the OnStop helper: when it returns, fn has finished or will never
  // run. OnStop may be called again afterwards. Idempotent.
  void CancelOnStop();
  // Stop signals received since Install().
  int received() const;

 private:
  StopSignals() = default;

  std::vector<std::pair<int, struct sigaction>> previous_;
  int quit_fd_ = -1;  // wakes the helper in the destructor
  std::thread helper_;
};

}  // namespace stripefs

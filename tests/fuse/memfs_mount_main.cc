// memfs_mount: test tool that mounts the in-memory MemFs through our engine
// and serves until SIGINT/SIGTERM (which unmounts gracefully). For manual
// checks and quick transport comparisons (fio), not a product binary.
//   memfs_mount MNT [dev|uring|auto] [dev_threads] [queue_depth]
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "fuse/engine_stats_json.h"
#include "fuse/fuse_mount.h"
#include "fuse/kernel_knobs.h"
#include "fuse/session.h"
#include "fuse/stop_signals.h"
#include "tests/fuse/mem_fs.h"

using namespace stripefs::fuse;  // NOLINT

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MNT [dev|uring|auto] [dev_threads] [depth]\n",
                 argv[0]);
    return 2;
  }
  std::string mnt = argv[1];
  SessionOptions so;
  if (argc > 2) {
    auto t = ParseTransportChoice(argv[2]);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      return 2;
    }
    so.transport = *t;
  }
  if (argc > 3) so.dev_threads = std::atoi(argv[3]);
  if (argc > 4) so.uring_queue_depth = std::atoi(argv[4]);
  so.init.align_page_order = 20;
  std::unique_ptr<ScopedKnob> knob;
  if (so.transport == TransportChoice::kUring) {
    auto k = EnableUring();
    if (!k.ok()) {
      std::fprintf(stderr, "%s\n", k.status().ToString().c_str());
      return 1;
    }
    knob = std::move(*k);
  }
  testing::MemFs fs;
  auto mount = FuseMount::Mount(mnt, MountOptions{});
  if (!mount.ok()) {
    std::fprintf(stderr, "%s\n", mount.status().ToString().c_str());
    return 1;
  }
  Session session(&fs, so);
  if (auto st = session.Start((*mount)->fd()); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  (void)InstallStopSignals(&session, mnt);
  session.WaitForInit(std::chrono::seconds(10));
  std::cout << EngineStatsToText(session.Stats()) << std::flush;
  auto why = session.Wait();
  RemoveStopSignals();
  std::cout << EngineStatsToText(session.Stats()) << std::flush;
  return why.ok() ? 0 : 1;
}

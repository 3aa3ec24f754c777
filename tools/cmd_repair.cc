// `stripefs repair` and `stripefs scrub`: restore full redundancy of a
// volume (embedded directory or cluster), with a progress bar and summary.
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "backend/client/repairer.h"
#include "backend/meta/meta_store.h"
#include "backend/rpc/client_lease.h"
#include "tools/command.h"
#include "tools/option_ranges.h"
#include "tools/volume_flags.h"

namespace stripefs::tools {
namespace {

void PrintProgress(const RepairProgress& p) {
  if (!isatty(STDERR_FILENO)) return;
  const int width = 30;
  int done = p.stripes_total == 0
                 ? width
                 : static_cast<int>(width * p.stripes_seen / p.stripes_total);
  std::fprintf(
      stderr, "\r[%.*s%*s] %llu/%llu stripes, %llu chunks rebuilt, %.1f MiB/s ",
      done, "==============================", width - done, "",
      static_cast<unsigned long long>(p.stripes_seen),
      static_cast<unsigned long long>(p.stripes_total),
      static_cast<unsigned long long>(p.chunks_rebuilt),
      p.seconds > 0 ? p.bytes_rebuilt / 1048576.0 / p.seconds : 0.0);
}

rpc::RepairReport ToReport(const RepairProgress& p) {
  rpc::RepairReport r;
  r.stripes_total = p.stripes_total;
  r.stripes_seen = p.stripes_seen;
  r.stripes_repaired = p.stripes_repaired;
  r.stripes_failed = p.stripes_failed;
  r.stripes_unreachable = p.stripes_unreachable;
  r.chunks_rebuilt = p.chunks_rebuilt;
  r.bytes_rebuilt = p.bytes_rebuilt;
  r.elapsed_ms = static_cast<uint64_t>(p.seconds * 1000);
  return r;
}

// A cluster repair reports its progress to metad, where `stripefs status`
// shows it (backend/rpc/client_lease.h); best effort.
std::unique_ptr<rpc::ClientLease> AnnounceRepair(const VolumeFlags& flags,
                                                 const RepairOptions& options) {
  if (flags.meta.empty()) return nullptr;
  auto key = rpc::ClusterKey::Load(flags.key_file);
  if (!key.ok()) return nullptr;
  return std::make_unique<rpc::ClientLease>(flags.meta,
                                            (*key)->WithSecureWire(flags.secure),
                                            options.scrub ? "scrub" : "repair",
                                            "", std::chrono::seconds(1));
}

int RunRepair(const VolumeFlags& flags, const RepairOptions& options) {
  auto volume = flags.Open();
  if (!volume.ok()) {
    std::fprintf(stderr, "stripefs: %s\n", volume.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<rpc::ClientLease> lease = AnnounceRepair(flags, options);
  Repairer repairer(volume->get());
  auto result = repairer.Run(options, [&](const RepairProgress& p) {
    PrintProgress(p);
    if (lease) lease->Update(ToReport(p));
  });
  if (lease && result.ok()) lease->Update(ToReport(*result));
  lease.reset();  // the last heartbeat: finished, with the final tally
  if (isatty(STDERR_FILENO)) std::fputc('\n', stderr);
  if (!result.ok()) {
    std::fprintf(stderr, "stripefs: %s failed: %s\n",
                 options.scrub ? "scrub" : "repair",
                 result.status().ToString().c_str());
    return 1;
  }
  const RepairProgress& p = *result;
  std::printf(
      "%s of %s: %llu stripes checked, %llu repaired, %llu failed "
      "(%llu still degraded: chunks on servers down), %llu chunks "
      "(%.1f MiB) rebuilt in %.1f s",
      options.scrub ? "scrub" : "repair", (*volume)->description().c_str(),
      static_cast<unsigned long long>(p.stripes_seen),
      static_cast<unsigned long long>(p.stripes_repaired),
      static_cast<unsigned long long>(p.stripes_failed),
      static_cast<unsigned long long>(p.stripes_unreachable),
      static_cast<unsigned long long>(p.chunks_rebuilt),
      p.bytes_rebuilt / 1048576.0, p.seconds);
  if (p.seconds > 0 && p.bytes_rebuilt > 0)
    std::printf(" (%.1f MiB/s)", p.bytes_rebuilt / 1048576.0 / p.seconds);
  std::printf("\n");
  if (options.scrub) {
    std::printf("orphan chunk versions: %llu found, %llu deleted%s\n",
                static_cast<unsigned long long>(p.orphan_chunks),
                static_cast<unsigned long long>(p.orphans_deleted),
                p.orphan_chunks > p.orphans_deleted && !options.delete_orphans
                    ? " (delete with --delete-orphans while no client writes)"
                    : "");
  }
  // Exit 2: the volume is still degraded (docs/backend.md).
  if (p.stripes_failed > 0) {
    std::fprintf(stderr,
                 "stripefs: %llu stripes could not be repaired (%llu of them "
                 "have chunks on servers that are down); first: %s\n"
                 "  bring the servers holding their chunks back up (or mark "
                 "dead ones out) and run repair again\n",
                 static_cast<unsigned long long>(p.stripes_failed),
                 static_cast<unsigned long long>(p.stripes_unreachable),
                 p.first_error.c_str());
    return 2;
  }
  return 0;
}

// `stripefs meta-repair DIR`: salvage a corrupted metadata store with
// RocksDB's repairer (rebuilds the MANIFEST from the tables and logs found;
// mutations in damaged files are lost), then check that it opens.
int RunMetaRepair(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::fprintf(stderr,
                 "stripefs: %s is not a directory: give the metadata store "
                 "(VOLUME/meta, or metad's --dir)\n",
                 dir.c_str());
    return 1;
  }
  rocksdb::Options o;
  o.paranoid_checks = true;
  rocksdb::Status s = rocksdb::RepairDB(dir, o);
  if (!s.ok()) {
    std::fprintf(stderr,
                 "stripefs: repairing %s failed: %s; restore it from a "
                 "backup\n",
                 dir.c_str(), s.ToString().c_str());
    return 1;
  }
  auto store = MetaStore::Open(dir, {});
  if (!store.ok()) {
    std::fprintf(stderr,
                 "stripefs: %s was repaired but still does not open: %s; "
                 "restore it from a backup\n",
                 dir.c_str(), store.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "repaired metadata store %s; run `stripefs scrub` on the volume to "
      "check its data\n",
      dir.c_str());
  return 0;
}

CommandRegistration repair_commands([](CLI::App& app) {
  {
    auto* cmd = app.add_subcommand(
        "meta-repair",
        "salvage a corrupted metadata store (RocksDB repair; stop its metad "
        "or mount first)");
    auto dir = std::make_shared<std::string>();
    cmd->add_option("DIR", *dir,
                    "the metadata store: VOLUME/meta or metad's "
                    "--dir")
        ->required();
    cmd->callback([dir] { ExitWith(RunMetaRepair(*dir)); });
  }
  for (bool scrub : {false, true}) {
    auto* cmd = app.add_subcommand(
        scrub ? "scrub" : "repair",
        scrub
            ? "read every chunk, check CRCs and parity, rebuild bad ones"
            : "rebuild missing chunks (degraded stripes, servers marked out)");
    auto flags = std::make_shared<VolumeFlags>();
    auto options = std::make_shared<RepairOptions>();
    options->scrub = scrub;
    flags->AddTo(cmd);
    cmd->add_option("--parallel", options->parallel, "stripes repaired at once")
        ->capture_default_str()
        ->check(InRange(kRepairParallelRange));
    if (scrub) {
      cmd->add_flag("--delete-orphans", options->delete_orphans,
                    "delete chunk versions no stripe references (only while "
                    "no client writes)");
    }
    cmd->callback([flags, options] { ExitWith(RunRepair(*flags, *options)); });
  }
});

}  // namespace
}  // namespace stripefs::tools

// `stripefs chunkstore stat|verify|sweep DIR`: offline inspection of one
// chunk store directory (a stopped chunkd's --dir, or chunks/NN of an
// embedded volume). The store is locked while open, so these refuse (EBUSY,
// naming the pid) while a chunkd or mount uses it.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "backend/chunk/chunk_store.h"
#include "tools/command.h"

namespace stripefs::tools {
namespace {

Result<std::unique_ptr<ChunkStore>> OpenExisting(const std::string& dir,
                                                 bool sweep) {
  ChunkStoreOptions o;
  o.create_if_missing = false;
  o.sweep_on_open = sweep;
  return ChunkStore::Open(dir, o);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "stripefs chunkstore: %s\n", s.ToString().c_str());
  return 1;
}

int RunStat(const std::string& dir, bool json) {
  auto store = OpenExisting(dir, false);
  if (!store.ok()) return Fail(store.status());
  auto st = (*store)->Stats();
  if (!st.ok()) return Fail(st.status());
  if (json) {
    std::printf("{\"dir\": \"%s\", \"chunks\": %" PRIu64
                ", \"bytes_stored\": %" PRIu64 ", \"bytes_free\": %" PRIu64
                ", \"bytes_capacity\": %" PRIu64
                ", \"bytes_reserved\": %" PRIu64
                ", \"malformed_entries\": %" PRIu64 ", \"io_uring\": %s}\n",
                dir.c_str(), st->chunks, st->bytes_stored, st->bytes_free,
                st->bytes_capacity, st->bytes_reserved,
                (*store)->Counters().malformed_entries,
                (*store)->using_io_uring() ? "true" : "false");
  } else {
    std::printf(
        "chunk store %s\n  chunks:       %" PRIu64 "\n  bytes stored: %" PRIu64
        " (%.1f MiB)\n  bytes free:   %" PRIu64
        " (%.1f MiB, of which %.1f MiB reserved; file system %.1f MiB)"
        "\n  malformed index entries: %" PRIu64 "\n  data I/O:     %s\n",
        dir.c_str(), st->chunks, st->bytes_stored, st->bytes_stored / 1048576.0,
        st->bytes_free, st->bytes_free / 1048576.0,
        st->bytes_reserved / 1048576.0, st->bytes_capacity / 1048576.0,
        (*store)->Counters().malformed_entries,
        (*store)->using_io_uring() ? "io_uring" : "pread/pwrite");
  }
  return 0;
}

int RunVerify(const std::string& dir) {
  auto store = OpenExisting(dir, false);
  if (!store.ok()) return Fail(store.status());
  uint64_t ok = 0, corrupt = 0, missing = 0, other = 0, bytes = 0;
  ChunkInfo cursor;
  const bool tty = isatty(STDERR_FILENO);
  for (;;) {
    auto page = (*store)->ListChunks(cursor, 1000);
    if (!page.ok()) return Fail(page.status());
    if (page->empty()) break;
    for (const ChunkInfo& c : *page) {
      auto r = (*store)->ReadChunk(c.id, c.version, 0, c.length);
      if (r.ok()) {
        ++ok;
        bytes += c.length;
      } else {
        if (r.status().code() == EBADMSG) {
          ++corrupt;
        } else if (r.status().code() == ENOENT) {
          ++missing;
        } else {
          ++other;
        }
        std::printf("BAD %s\n", r.status().ToString().c_str());
      }
    }
    cursor = page->back();
    if (tty) {
      std::fprintf(stderr, "\r%" PRIu64 " chunks verified",
                   ok + corrupt + missing + other);
    }
  }
  if (tty) std::fputc('\n', stderr);
  std::printf("verified %" PRIu64 " chunks (%.1f MiB) in %s: %" PRIu64
              " good, %" PRIu64 " corrupt, %" PRIu64 " missing, %" PRIu64
              " unreadable\n",
              ok + corrupt + missing + other, bytes / 1048576.0, dir.c_str(),
              ok, corrupt, missing, other);
  if (corrupt + missing + other > 0) {
    std::fprintf(stderr,
                 "stripefs chunkstore: bad chunks found; start the server "
                 "again and run `stripefs scrub` (or `stripefs repair`) to "
                 "rebuild them from the other chunks of their stripes\n");
    return 1;
  }
  return 0;
}

int RunSweep(const std::string& dir) {
  auto store = OpenExisting(dir, false);
  if (!store.ok()) return Fail(store.status());
  auto r = (*store)->Sweep();
  if (!r.ok()) return Fail(r.status());
  std::printf("sweep of %s: %" PRIu64 " temp files and %" PRIu64
              " orphan chunk files removed, %" PRIu64
              " index entries without a file dropped, %" PRIu64
              " empty directories removed, %" PRIu64
              " unknown files left alone\n",
              dir.c_str(), r->temp_files_removed, r->orphans_removed,
              r->missing_dropped, r->empty_dirs_removed, r->unknown_files);
  return 0;
}

CommandRegistration chunkstore_commands([](CLI::App& app) {
  auto* top = app.add_subcommand(
      "chunkstore",
      "inspect one chunk store directory offline (stop its chunkd first)");
  top->require_subcommand(1);

  auto dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* stat = top->add_subcommand("stat", "chunk count, bytes, free space");
  stat->add_option("dir", *dir, "chunk store directory")->required();
  stat->add_flag("--json", *json, "print JSON");
  stat->callback([dir, json] { ExitWith(RunStat(*dir, *json)); });

  auto* verify = top->add_subcommand(
      "verify", "read every chunk and check its CRC32C; exit 1 if any is bad");
  verify->add_option("dir", *dir, "chunk store directory")->required();
  verify->callback([dir] { ExitWith(RunVerify(*dir)); });

  auto* sweep = top->add_subcommand(
      "sweep",
      "remove temp/orphan files and drop index entries whose file is gone");
  sweep->add_option("dir", *dir, "chunk store directory")->required();
  sweep->callback([dir] { ExitWith(RunSweep(*dir)); });
});

}  // namespace
}  // namespace stripefs::tools

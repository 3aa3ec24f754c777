// Child of OrphanPurgeCrashTest: in the embedded volume at argv[1], writes
// round argv[2]'s live file and kDeadPerRound files, unlinks those, writes
// 'P' to fd argv[3], then purges every orphan as a mount does (the test
// kills it with SIGKILL meanwhile) and writes 'D' when done. With argv[4]
// "mid" it stops inside the purge instead, after the chunk deletes and
// before the metadata goes, writes 'M' and waits for the kill there.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/client/orphan_purger.h"
#include "backend/client/volume.h"
#include "tests/client/orphan_purge_workload.h"
#include "tests/support/random_bytes.h"

using namespace stripefs;
using namespace stripefs::testing;

namespace {
int Fail(const std::string& what, const Status& st) {
  std::fprintf(stderr, "orphan_purge_child: %s: %s\n", what.c_str(),
               st.ToString().c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && std::string(argv[4]) == "mid")) {
    std::fprintf(stderr, "usage: orphan_purge_child DIR ROUND FD [mid]\n");
    return 2;
  }
  const bool stop_mid = argc == 5;
  const int round = std::atoi(argv[2]);
  const int fd = std::atoi(argv[3]);
  EmbeddedVolumeOptions o;
  o.geometry = kPurgeGeometry;
  o.chunk_reserve_bytes = 0;
  auto v = Volume::OpenEmbedded(argv[1], o);
  if (!v.ok()) return Fail("open", v.status());
  MetaService& meta = (*v)->meta();
  StripeClient& client = (*v)->client();
  auto write = [&](const std::string& name, uint64_t bytes, uint32_t seed) {
    auto f = meta.MkNode(kRootInode, name, 0100644, 0, 0, 0);
    if (!f.ok()) return f.status();
    return client.Write(f->ino, 0, RandomBytes(bytes, seed));
  };
  Status st = write(LiveName(round), kLiveBytes, LiveSeed(round));
  if (!st.ok()) return Fail("write live file", st);
  for (int i = 0; i < kDeadPerRound; ++i) {
    st = write(DeadName(round, i), kDeadBytes, static_cast<uint32_t>(i));
    if (!st.ok()) return Fail("write file", st);
  }
  for (int i = 0; i < kDeadPerRound; ++i) {
    auto a = meta.Unlink(kRootInode, DeadName(round, i));
    if (!a.ok()) return Fail("unlink", a.status());
  }
  if (::write(fd, "P", 1) != 1) return 1;
  std::atomic<uint64_t> purged{0}, errors{0};
  {
    OrphanPurger::Parts parts{&meta, &client, &purged, &errors};
    if (stop_mid) {
      parts.after_chunk_deletes = [fd] {
        if (::write(fd, "M", 1) == 1) ::pause();  // until killed
        _exit(1);
      };
    }
    OrphanPurger purger(parts);
    auto orphans = meta.ListOrphans();
    if (!orphans.ok()) return Fail("list orphans", orphans.status());
    for (uint64_t ino : *orphans) purger.Enqueue(ino);
    purger.Drain();
  }
  if (errors.load() != 0) return 1;
  if (::write(fd, "D", 1) != 1) return 1;
  ::pause();  // until killed
  return 0;
}

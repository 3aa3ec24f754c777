// `stripefs chunkstore stat|verify|sweep` against a real store directory.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "backend/chunk/chunk_store.h"
#include "tests/chunk/chunk_store_test_util.h"
#include "tests/support/run_command.h"

namespace stripefs {
namespace {

using testing::FlipBits;
using testing::Payload;
using testing::TempDir;

using CliRun = testing::CommandOutput;  // out: stdout and stderr

CliRun Cli(const std::string& args) {
  return testing::RunCommand(std::string(STRIPEFS_BIN) + " " + args + " 2>&1");
}

TEST(ChunkStoreCli, StatVerifySweep) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  std::string corrupt_path;
  uint64_t corrupt_offset = 0;
  {
    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    auto s = ChunkStore::Open(dir, o);
    ASSERT_TRUE(s.ok());
    for (uint64_t i = 0; i < 20; ++i) {
      ASSERT_TRUE((*s)->WriteChunk({9, i, 1}, 3, Payload(5000, i)).ok());
    }
    auto loc = (*s)->Locate({9, 7, 1}, 3);
    ASSERT_TRUE(loc.ok()) << loc.status().ToString();
    corrupt_path = loc->path;
    corrupt_offset = loc->offset;
    // Busy while open: the tool says who holds it.
    CliRun busy = Cli("chunkstore stat " + dir);
    EXPECT_EQ(busy.rc, 1);
    EXPECT_NE(busy.out.find("already open"), std::string::npos) << busy.out;
  }
  CliRun stat = Cli("chunkstore stat --json " + dir);
  EXPECT_EQ(stat.rc, 0) << stat.out;
  EXPECT_NE(stat.out.find("\"chunks\": 20"), std::string::npos) << stat.out;

  CliRun good = Cli("chunkstore verify " + dir);
  EXPECT_EQ(good.rc, 0) << good.out;
  EXPECT_NE(good.out.find("20 good, 0 corrupt"), std::string::npos) << good.out;

  FlipBits(corrupt_path, static_cast<off_t>(corrupt_offset + 4999), 0x01);
  CliRun bad = Cli("chunkstore verify " + dir);
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_NE(bad.out.find("19 good, 1 corrupt"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("stripe 7"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("stripefs scrub"), std::string::npos) << bad.out;

  CliRun sweep = Cli("chunkstore sweep " + dir);
  EXPECT_EQ(sweep.rc, 0) << sweep.out;

  CliRun missing = Cli("chunkstore stat " + tmp.path() + "/nope");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.out.find("does not exist"), std::string::npos)
      << missing.out;
}

}  // namespace
}  // namespace stripefs

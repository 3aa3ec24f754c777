// Crash safety of MetaStore: a child process (meta_crash_child) mutates a
// store and is killed with SIGKILL at random points; after each kill the
// store must reopen with every invariant intact and every acknowledged
// change present.
#include <gtest/gtest.h>

#include "tests/meta/meta_crash_rounds.h"

namespace stripefs {
namespace {

using testing::CrashRoundsSetup;
using testing::TempDir;

// The store and the child's acknowledgements in a temporary directory.
void CrashRoundsInTempDir(int rounds, const char* lazy_ms, uint32_t seed) {
  TempDir tmp;
  testing::CrashRounds(rounds, lazy_ms, seed,
                       CrashRoundsSetup{META_CRASH_CHILD, tmp.sub("meta"),
                                        tmp.sub("acks"), nullptr});
}

TEST(MetaStoreCrash, SigkillAtRandomPointsKeepsInvariants) {
  CrashRoundsInTempDir(16, "0", 20261130);
}

// Namespace mutations acknowledged before their WAL sync (a long delay, so
// the background sync rarely runs): a kill -9 loses none of them, since
// RocksDB wrote the WAL record to the page cache before the reply.
TEST(MetaStoreCrash, SigkillLosesNoLazilySyncedNamespaceChange) {
  CrashRoundsInTempDir(10, "1000", 20261202);
}

}  // namespace
}  // namespace stripefs

// The MetaStore crash rounds shared by MetaStoreCrash (kill -9) and
// MetaStorePowerCutTest (kill -9 then a LossyFs power cut): a child process
// (meta_crash_child) mutates a store and is killed at random points; after
// each kill the store must reopen with every invariant intact and every
// acknowledged change present. Test code; use from the test's main thread.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/meta/meta_store.h"
#include "tests/meta/meta_test_util.h"

namespace stripefs::testing {

struct Acks {
  uint64_t max_version = 0;                      // highest allocated
  std::vector<std::string> log_names;            // acknowledged creates
  std::set<std::string> unlinking;               // unlinks attempted
  std::set<std::string> unlinked;                // acknowledged unlinks
  std::map<uint64_t, uint64_t> acked;            // stripe -> last acked
  std::map<uint64_t, std::set<uint64_t>> tried;  // stripe -> attempted
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>>
      batches;  // CommitStripes calls: (stripe, version) each
  // The namespace lines in file order: (tag 'L' 'u' 'U' or 'S', name).
  std::vector<std::pair<char, std::string>> events;
};

inline Acks ReadAcks(const std::string& path) {
  Acks a;
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
  // Only complete lines count.
  content.resize(
      content.rfind('\n') == std::string::npos ? 0 : content.rfind('\n') + 1);
  std::istringstream lines(content);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string tag;
    f >> tag;
    if (tag == "L" || tag == "u" || tag == "U" || tag == "S") {
      std::istringstream g(line);
      std::string t, name;
      g >> t >> name;
      a.events.emplace_back(tag[0], name);
    }
    if (tag == "V") {
      uint64_t first = 0, count = 0;
      f >> first >> count;
      a.max_version = std::max(a.max_version, first + count - 1);
    } else if (tag == "U" || tag == "u") {
      std::string name;
      f >> name;
      (tag == "U" ? a.unlinked : a.unlinking).insert(name);
    } else if (tag == "L") {
      std::string name;
      f >> name;
      a.log_names.push_back(name);
    } else if (tag == "B") {
      size_t n = 0;
      f >> n;
      std::vector<std::pair<uint64_t, uint64_t>> batch(n);
      for (auto& [s, v] : batch) f >> s >> v;
      a.batches.push_back(std::move(batch));
    } else if (tag == "c" || tag == "C") {
      uint64_t s = 0, v = 0;
      f >> s >> v;
      if (tag == "c") {
        a.tried[s].insert(v);
      } else {
        a.acked[s] = v;
      }
    }
  }
  return a;
}

// Where CrashRounds runs its child.
struct CrashRoundsSetup {
  std::string child;    // the meta_crash_child binary
  std::string dir;      // the store's directory (created here)
  std::string ackfile;  // the child's acknowledgements (on another file
                        // system than `dir` when after_kill cuts power)
  // Called after each kill, before the reopen (e.g. a LossyFs power cut).
  std::function<void()> after_kill;
  // A power cut with lazy_ms > 0: acknowledged namespace changes since the
  // last sync may be lost (the --namespace-sync-ms window). Checked instead
  // of "every acknowledged change survived": see CheckLazyWindow. The child
  // runs one thread (its acknowledgements are then in WAL order).
  bool lazy_window = false;
};

// The --namespace-sync-ms contract after a power cut, for the namespace
// events [from, end) of one round of a one-thread child (each mutation's
// WAL record lies between the line before its acknowledgement and that
// acknowledgement; the WAL is one sequence): the changes that survived are
// a prefix of those acknowledged: the first lost one comes after the last
// acknowledged Sync ("S"), and nothing acknowledged after it survived.
// A name created and unlinked that is gone fits any cut (both kept or both
// lost); an unlink whose acknowledgement is missing (killed during it) may
// be either way. Returns the number of acknowledged changes lost.
inline size_t CheckLazyWindow(MetaStore& s, uint64_t log, const Acks& acks,
                              size_t from) {
  const auto& ev = acks.events;
  size_t last_sync = from;  // changes before this index must survive
  std::map<std::string, size_t> created, unlinked, unlinking;
  for (size_t i = from; i < ev.size(); ++i) {
    if (ev[i].first == 'S') last_sync = i;
    if (ev[i].first == 'L') created[ev[i].second] = i;
    if (ev[i].first == 'U') unlinked[ev[i].second] = i;
    if (ev[i].first == 'u') unlinking[ev[i].second] = i;
  }
  // Each acknowledged change at its index, and whether it survived.
  std::map<size_t, bool> survived;
  for (const auto& [name, at] : created) {
    const bool present = s.Lookup(log, name).ok();
    auto u = unlinked.find(name);
    if (present) {
      survived[at] = true;
      if (u != unlinked.end()) survived[u->second] = false;
    } else if (u == unlinked.end() && !unlinking.count(name)) {
      survived[at] = false;
    }
    // Absent after an unlink: both kept or both lost, either fits a prefix.
  }
  size_t lost = 0;
  std::optional<size_t> first_lost;
  for (const auto& [at, kept] : survived) {
    if (!kept && !first_lost) first_lost = at;
    lost += !kept;
    if (kept && first_lost) {
      ADD_FAILURE() << "acknowledged change " << ev[at].first << " "
                    << ev[at].second << " (event " << at
                    << ") survived the cut but the earlier "
                    << ev[*first_lost].first << " " << ev[*first_lost].second
                    << " (event " << *first_lost
                    << ") was lost: not a prefix of the WAL";
    }
  }
  if (first_lost) {
    EXPECT_GT(*first_lost, last_sync)
        << ev[*first_lost].first << " " << ev[*first_lost].second
        << " was lost although a Sync() acknowledged after it (event "
        << last_sync << ") returned";
  }
  return lost;
}

// Kills a child `rounds` times; lazy_ms is the child's namespace_sync_delay
// ("0": every mutation synced before it is acknowledged). After each kill
// the store reopens with every invariant intact and every acknowledged
// change present.
inline void CrashRounds(int rounds, const char* lazy_ms, uint32_t seed,
                        const CrashRoundsSetup& setup) {
  const std::string& dir = setup.dir;
  const std::string& ackfile = setup.ackfile;
  const char* child = setup.child.c_str();
  {
    auto s = MetaStore::Create(dir, Geometry{4, 2, 64 * 1024});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->Mkdir(kRootInode, "log", 0755, 0, 0).ok());
    ASSERT_TRUE((*s)->Mkdir(kRootInode, "play", 0755, 0, 0).ok());
    ASSERT_TRUE((*s)->MkNode(kRootInode, "data", S_IFREG | 0644, 0, 0, 0).ok());
  }
  std::mt19937 rng(seed);
  size_t total_logged = 0;
  size_t batches_before = 0;               // batches of earlier rounds
  size_t events_before = 0;                // namespace events of earlier rounds
  std::map<std::string, bool> lazy_state;  // lazy_window: name -> present
  size_t lazy_lost = 0;  // acknowledged changes the cuts took (the window)
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string seed = std::to_string(round + 1);
      // Odd rounds add three threads that commit concurrently.
      const char* threads = round % 2 && !setup.lazy_window ? "4" : "1";
      execl(child, child, dir.c_str(), seed.c_str(), ackfile.c_str(), threads,
            lazy_ms, static_cast<char*>(nullptr));
      _exit(127);
    }
    // Early rounds also hit the child while it opens/recovers the store.
    int ms = round < 2 ? 1 + static_cast<int>(rng() % 20)
                       : 20 + static_cast<int>(rng() % 900);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child ended by itself (exit code "
        << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
        << "): it hit an unexpected error, see its stderr";
    if (setup.after_kill) setup.after_kill();

    auto opened = MetaStore::Open(dir);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    MetaStore& s = **opened;
    Acks acks = ReadAcks(ackfile);
    testing::VolumeCensus census = CheckInvariants(s);
    // No version handed out before the crash is handed out again.
    auto next = s.AllocateVersions(1);
    ASSERT_TRUE(next.ok());
    EXPECT_GT(*next, acks.max_version);
    EXPECT_GT(*next, census.max_version);
    uint64_t log = s.Lookup(kRootInode, "log")->ino;
    if (setup.lazy_window) {
      // Earlier rounds' names kept what the last cut left (that state was
      // durable); this round's changes obey the window.
      for (const auto& [name, present] : lazy_state)
        EXPECT_EQ(s.Lookup(log, name).ok(), present) << name;
      lazy_lost += CheckLazyWindow(s, log, acks, events_before);
      for (size_t i = events_before; i < acks.events.size(); ++i)
        if (acks.events[i].first == 'L')
          lazy_state[acks.events[i].second] =
              s.Lookup(log, acks.events[i].second).ok();
      events_before = acks.events.size();
    }
    // Every acknowledged create and unlink survived.
    for (const auto& name :
         setup.lazy_window ? std::vector<std::string>{} : acks.log_names) {
      if (acks.unlinked.count(name)) {
        EXPECT_EQ(s.Lookup(log, name).status().code(), ENOENT)
            << "acknowledged unlink of " << name << " is undone";
      } else if (acks.unlinking.count(name)) {
        // Killed during the unlink: either state is fine.
      } else {
        EXPECT_TRUE(s.Lookup(log, name).ok())
            << "acknowledged " << name << " is gone";
      }
    }
    total_logged = acks.log_names.size();
    // Every acknowledged commit survived (or was superseded by a later,
    // attempted one); nothing unknown was committed.
    uint64_t data = s.Lookup(kRootInode, "data")->ino;
    for (const auto& [stripe, v] : acks.acked) {
      auto cur = s.GetStripes(data, stripe, 1);
      ASSERT_TRUE(cur.ok());
      ASSERT_EQ(cur->size(), 1u) << "stripe " << stripe << " lost";
      EXPECT_GE((*cur)[0].version, v);
      EXPECT_TRUE(acks.tried[stripe].count((*cur)[0].version));
    }
    // A CommitStripes batch is all or nothing: once one of its stripes
    // reached its version, all did (data's stripes only move forward).
    // Checked for this round's batches only: a later round commits newer
    // versions of some stripes of a batch that this round's kill undid.
    for (size_t b = batches_before; b < acks.batches.size(); ++b) {
      const auto& batch = acks.batches[b];
      int reached = 0;
      for (const auto& [stripe, v] : batch) {
        auto cur = s.GetStripes(data, stripe, 1);
        ASSERT_TRUE(cur.ok());
        if (!cur->empty() && (*cur)[0].version >= v) ++reached;
      }
      EXPECT_TRUE(reached == 0 || reached == static_cast<int>(batch.size()))
          << reached << " of " << batch.size() << " stripes of a batch";
    }
    batches_before = acks.batches.size();
  }
  // The child must actually have done work across the rounds.
  EXPECT_GT(total_logged, 10u);
  Acks all = ReadAcks(ackfile);
  size_t commits = 0;
  for (const auto& [stripe, tried] : all.tried) commits += tried.size();
  std::printf(
      "crash test (lazy %s ms): %d kills, %zu acknowledged creates, %zu "
      "unlinks, %zu commits attempted, versions up to %llu\n",
      lazy_ms, rounds, all.log_names.size(), all.unlinked.size(), commits,
      static_cast<unsigned long long>(all.max_version));
  if (setup.lazy_window)
    std::printf("%zu acknowledged changes lost inside the window\n", lazy_lost);
}

}  // namespace stripefs::testing

// common/stop_signals.h: a stop signal reaches Wait() or the OnStop helper
// exactly once, cancelling the helper means it never runs, one instance at a
// time, and the previous handlers come back.
#include "common/stop_signals.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>

namespace stripefs {
namespace {

TEST(StopSignals, WaitReturnsTheSignal) {
  auto s = StopSignals::Install();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(::raise(SIGTERM), 0);  // the handler runs before raise returns
  EXPECT_EQ((*s)->Wait(), SIGTERM);
  EXPECT_EQ((*s)->Wait(), SIGTERM) << "a second Wait returns at once";
  EXPECT_EQ((*s)->received(), 1);
}

TEST(StopSignals, OnStopRunsTheCallbackOnceOnAHelperThread) {
  auto s = StopSignals::Install({SIGINT, SIGTERM, SIGHUP});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::promise<int> got;
  std::atomic<int> calls{0};
  (*s)->OnStop([&](int sig) {
    if (calls.fetch_add(1) == 0) got.set_value(sig);
  });
  ASSERT_EQ(::raise(SIGHUP), 0);
  auto f = got.get_future();
  // Bounded wait for the helper (a hang fails the test, no time is judged).
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get(), SIGHUP);
  ASSERT_EQ(::raise(SIGINT), 0);
  s->reset();  // joins the helper
  EXPECT_EQ(calls.load(), 1);
}

TEST(StopSignals, ACancelledCallbackNeverRuns) {
  auto s = StopSignals::Install();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::atomic<bool> ran{false};
  (*s)->OnStop([&](int) { ran = true; });
  (*s)->CancelOnStop();
  ASSERT_EQ(::raise(SIGINT), 0);  // still handled: counted, not fatal
  EXPECT_EQ((*s)->received(), 1);
  s->reset();
  EXPECT_FALSE(ran.load());
}

TEST(StopSignals, OneAtATimeAndPreviousHandlersRestored) {
  struct sigaction ignore {
  }, before{}, after{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ASSERT_EQ(sigaction(SIGTERM, &ignore, &before), 0);
  {
    auto a = StopSignals::Install();
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = StopSignals::Install();
    EXPECT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), EINVAL);
  }
  ASSERT_EQ(sigaction(SIGTERM, &before, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_IGN) << "the ignore disposition came back";
  auto c = StopSignals::Install();
  EXPECT_TRUE(c.ok()) << "a new instance after the old one ended";
}

}  // namespace
}  // namespace stripefs

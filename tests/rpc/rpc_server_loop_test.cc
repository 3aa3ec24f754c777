// Integration tests of the RpcServer event loops on 127.0.0.1: the io_uring
// loop (default) and the poll fallback run the same tests (parameter), with
// a test handler that echoes bytes, so replies can be checked byte for byte.
// Plus: the fallback when io_uring_setup is refused (seccomp on the thread
// that starts the server), and fd/thread census around Stop().
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "backend/rpc/rpc_client.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/tcp_socket.h"
#include "backend/rpc/wire_messages.h"
#include "tests/rpc/raw_session.h"
#include "tests/rpc/test_sessions.h"
#include "tests/support/eventually.h"
#include "tests/support/io_uring_probe.h"
#include "tests/support/process_counts.h"
#include "tests/support/random_bytes.h"

namespace stripefs::rpc {
namespace {

using testing::TestKey;

constexpr uint16_t kEcho =
    0x7E01;  // reply payload = request payload, bulk = bulk
constexpr uint16_t kBlock = 0x7E02;  // waits until released, then echoes
// Echoes like kEcho, but the handler declares it inline-safe: the io_uring
// loop answers it on its own thread.
constexpr uint16_t kInlineEcho = 0x7E03;

using stripefs::testing::IoUringRefusedReason;

// Deterministic test payload (tests/support/random_bytes.h).
std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
  return stripefs::testing::RandomBytes(n, seed);
}

class EchoHandler : public RpcHandler {
 public:
  std::string Role() const override { return "echo"; }
  void Handle(const rpc::Caller&, uint16_t type,
              std::span<const uint8_t> payload, AlignedBytes& bulk,
              RpcReply* reply) override {
    if (type == kBlock) {
      std::unique_lock<std::mutex> l(mu_);
      ++blocked_;
      cv_.notify_all();
      cv_.wait(l, [&] { return released_; });
    }
    if (type == kInlineEcho) {
      // Records whether inline requests really ran on one thread that is
      // not a worker: the io_uring loop's (every call on the same thread).
      std::lock_guard<std::mutex> l(mu_);
      inline_threads_.insert(std::this_thread::get_id());
    }
    reply->payload.assign(payload.begin(), payload.end());
    reply->bulk_storage = std::move(bulk);
    reply->bulk = reply->bulk_storage;
  }
  bool InlineSafe(uint16_t type,
                  std::span<const uint8_t> /*payload*/) const override {
    return type == kInlineEcho;
  }
  size_t InlineThreads() {
    std::lock_guard<std::mutex> l(mu_);
    return inline_threads_.size();
  }
  // Waits (bounded) until `n` kBlock calls are inside the handler.
  bool WaitBlocked(int n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(20),
                        [&] { return blocked_ >= n; });
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int blocked_ = 0;
  bool released_ = false;
  std::set<std::thread::id> inline_threads_;
};

using testing::Eventually;

Deadline Soon() { return Clock::now() + std::chrono::seconds(20); }

using testing::CountFds;
using testing::CountThreads;
using testing::RawSession;
using testing::SendRequest;

// Reads until EOF or error; true if the peer closed the connection.
bool ClosedByPeer(int fd) {
  for (int i = 0; i < 2000; ++i) {
    uint8_t buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0 && errno == ECONNRESET) return true;
    if (n < 0 && errno != EAGAIN) return false;
    if (n < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The replies to requests 1..n arrive in order, then the reject frame of a
// bad tag (EACCES), then the server closes the connection.
void ExpectRepliesThenRejectAndClose(RawSession& fd, uint64_t n) {
  for (uint64_t id = 1; id <= n; ++id) {
    auto r = ReadFrame(fd.get(), fd.s.recv, Soon());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->header.request_id, id);
  }
  auto r = ReadFrame(fd.get(), fd.s.recv, Soon());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EACCES);
  EXPECT_TRUE(ClosedByPeer(fd.get()));
}

enum class Loop { kUring, kPoll };

class RpcServerLoopTest : public ::testing::TestWithParam<Loop> {
 protected:
  void SetUp() override {
    key_ = TestKey(5);
    baseline_fds_ = CountFds();
    baseline_threads_ = CountThreads();
    Start();
  }
  void TearDown() override {
    handler_.Release();
    if (server_) server_->Stop();
  }
  void Start(size_t max_connections = 1024) {
    RpcServerOptions o;
    o.log_name = "loop-test";
    o.use_io_uring = GetParam() == Loop::kUring;
    o.max_connections = max_connections;
    o.worker_threads = 4;
    auto s = RpcServer::Start(o, key_, &handler_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    if (std::string why = IoUringRefusedReason();
        GetParam() == Loop::kUring && !why.empty()) {
      GTEST_SKIP() << why << "; only the poll loop was tested";
    }
    ASSERT_EQ(server_->using_io_uring(), GetParam() == Loop::kUring);
  }
  // A TCP connection without the handshake.
  UniqueFd ConnectRaw() {
    auto fd = ConnectTcp(server_->address(), Soon());
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    return fd.ok() ? std::move(fd).value() : UniqueFd();
  }
  // A connection after the handshake.
  RawSession Connect() {
    auto c = testing::OpenRawSession(server_->address(), *key_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : RawSession();
  }
  // One echo round trip on a raw connection; true if byte-exact.
  bool EchoOn(RawSession& c, uint64_t id, size_t payload_len, size_t bulk_len) {
    auto p = Bytes(payload_len, static_cast<uint32_t>(id));
    auto b = Bytes(bulk_len, static_cast<uint32_t>(id) + 7);
    if (!SendRequest(c, kEcho, id, p, b).ok()) return false;
    auto r = ReadFrame(c.get(), c.s.recv, Soon());
    return r.ok() && r->header.request_id == id && r->header.type == kEcho &&
           (r->header.flags & kFlagResponse) && r->payload == p && r->bulk == b;
  }

  EchoHandler handler_;
  std::shared_ptr<const ClusterKey> key_;
  std::unique_ptr<RpcServer> server_;
  int baseline_fds_ = 0;
  int baseline_threads_ = 0;
};

TEST_P(RpcServerLoopTest, SixtyFourClientsTimesHundredCallsByteExact) {
  constexpr int kClients = 64, kCalls = 100;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      RpcClientOptions co;
      co.call_timeout = std::chrono::seconds(60);
      RpcClient client(server_->address(), key_, co);
      std::mt19937 rng(t);
      for (int i = 0; i < kCalls; ++i) {
        uint32_t seed = static_cast<uint32_t>(t * 1000 + i);
        // Mostly small calls, some with chunk-sized bulk.
        size_t bulk_len =
            (i % 10 == 0) ? 64 * 1024 + rng() % 200000 : rng() % 3000;
        auto p = Bytes(rng() % 200, seed);
        auto b = Bytes(bulk_len, seed + 1);
        auto r = client.Call(kEcho, p, b);
        if (!r.ok() || r->payload != p || r->bulk != b) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  auto c = server_->counters();
  EXPECT_GE(c.connections, uint64_t{kClients});
  EXPECT_EQ(c.requests, uint64_t{kClients * kCalls});
  EXPECT_EQ(c.rejected_total(), 0u);
}

TEST_P(RpcServerLoopTest, PipelinedRequestsAreAnsweredInOrder) {
  RawSession fd = Connect();
  constexpr int kFrames = 40;
  std::vector<std::vector<uint8_t>> payloads, bulks;
  // Written back to back without reading: the server reads ahead, handles
  // them one at a time and must answer in request order.
  std::thread writer([&] {
    for (int i = 0; i < kFrames; ++i) {
      auto p = Bytes(i * 13, i);
      auto b = Bytes(i % 3 == 0 ? 100000 : i, i + 100);
      EXPECT_TRUE(SendRequest(fd, kEcho, 1000 + i, p, b).ok());
    }
  });
  for (int i = 0; i < kFrames; ++i) {
    auto r = ReadFrame(fd.get(), fd.s.recv, Soon());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->header.request_id, uint64_t(1000 + i));
    EXPECT_EQ(r->payload, Bytes(i * 13, i));
    EXPECT_EQ(r->bulk, Bytes(i % 3 == 0 ? 100000 : i, i + 100));
  }
  writer.join();
}

TEST_P(RpcServerLoopTest, FrameDribbledByteByByteIsAnswered) {
  RawSession fd = Connect();
  FrameHeader h;
  h.type = kEcho;
  h.request_id = 77;
  auto p = Bytes(300, 1);
  auto wire = EncodeFrame(fd.s.send, h, p, {});
  for (uint8_t byte : wire) {
    ASSERT_EQ(::send(fd.get(), &byte, 1, MSG_NOSIGNAL), 1);
  }
  auto r = ReadFrame(fd.get(), fd.s.recv, Soon());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->header.request_id, 77u);
  EXPECT_EQ(r->payload, p);
}

TEST_P(RpcServerLoopTest, HalfAFrameThenDisconnectIsCountedAndClosed) {
  {
    RawSession fd = Connect();
    ASSERT_TRUE(EchoOn(fd, 1, 10, 10));  // connection is live
    auto wire = EncodeFrame(fd.s.send, FrameHeader{}, Bytes(5000, 2), {});
    wire.resize(wire.size() / 2);
    ASSERT_EQ(::send(fd.get(), wire.data(), wire.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(wire.size()));
  }  // closed mid-frame
  EXPECT_TRUE(Eventually([&] {
    return server_->counters().rejected_truncated == 1 &&
           server_->counters().open_connections == 0;
  }));
  RawSession fd = Connect();
  EXPECT_TRUE(EchoOn(fd, 2, 10, 10));  // the server lives on
  EXPECT_EQ(server_->counters().rejected_total(), 1u);
}

TEST_P(RpcServerLoopTest, FrameOverTheLimitIsRejectedBeforeItsBody) {
  RawSession fd = Connect();
  FrameHeader h;
  h.type = kEcho;
  h.payload_len = kMaxPayload + 1;
  uint8_t hdr[kFrameHeaderSize];
  EncodeHeader(h, hdr);
  ASSERT_EQ(::send(fd.get(), hdr, sizeof(hdr), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(hdr)));
  // The reject frame comes back without the server waiting for a body.
  auto r = ReadFrame(fd.get(), fd.s.recv, Soon());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EACCES);
  EXPECT_NE(r.status().message().find("length over limit"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(ClosedByPeer(fd.get()));
  EXPECT_EQ(server_->counters().rejected_oversize, 1u);
  RawSession other = Connect();
  EXPECT_TRUE(EchoOn(other, 3, 10, 10));
}

TEST_P(RpcServerLoopTest, BadMacAfterGoodFramesAnswersThemThenRejects) {
  RawSession fd = Connect();
  std::vector<uint8_t> stream;
  for (uint64_t id = 1; id <= 3; ++id) {
    FrameHeader h;
    h.type = kEcho;
    h.request_id = id;
    auto w = EncodeFrame(fd.s.send, h, Bytes(20, id), {});
    stream.insert(stream.end(), w.begin(), w.end());
  }
  testing::Link wrong = testing::MakeLink(*TestKey(9));
  auto bad = EncodeFrame(wrong.tx, FrameHeader{}, Bytes(20, 9), {});
  stream.insert(stream.end(), bad.begin(), bad.end());
  ASSERT_EQ(::send(fd.get(), stream.data(), stream.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(stream.size()));
  ExpectRepliesThenRejectAndClose(fd, 3);
  EXPECT_EQ(server_->counters().rejected_bad_mac, 1u);
}

TEST_P(RpcServerLoopTest, ClientThatNeverReadsDoesNotBlockOthers) {
  RawSession hog = Connect();
  // Requests with 1 MiB bulk, echoed back: the replies fill the socket
  // buffers because the hog never reads. Send until the server stops
  // taking more (it stops reading a connection whose replies are stuck).
  auto big = Bytes(1 << 20, 4);
  FrameHeader h;
  h.type = kEcho;
  int sent = 0;
  for (int i = 0; i < 64; ++i) {
    h.request_id = i;
    Status s = WriteFrame(hog.get(), hog.s.send, h, {}, big,
                          Clock::now() + std::chrono::milliseconds(500));
    if (!s.ok()) break;  // ETIMEDOUT: the server no longer reads from us
    ++sent;
  }
  EXPECT_GE(sent, 2);
  // Everyone else is served normally, in parallel connections.
  std::atomic<int> bad{0};
  std::vector<std::thread> others;
  for (int t = 0; t < 4; ++t) {
    others.emplace_back([&, t] {
      RpcClient c(server_->address(), key_);
      for (int i = 0; i < 25; ++i) {
        auto b = Bytes(100 + i, t * 100 + i);
        auto r = c.Call(kEcho, {}, b);
        if (!r.ok() || r->bulk != b) ++bad;
      }
    });
  }
  for (auto& th : others) th.join();
  EXPECT_EQ(bad.load(), 0);
  // The hog's replies are still there, in order, when it finally reads.
  for (int i = 0; i < std::min(sent, 3); ++i) {
    auto r = ReadFrame(hog.get(), hog.s.recv, Soon());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->header.request_id, uint64_t(i));
    EXPECT_TRUE(r->bulk == big);
  }
}

// Inline requests (kInlineEcho) are handled on the loop thread; a worker
// request earlier on the same connection still gets its reply first.
TEST_P(RpcServerLoopTest, InlineRequestWaitsForTheSlowWorkerRequestBeforeIt) {
  RawSession fd = Connect();
  ASSERT_TRUE(SendRequest(fd, kBlock, 1, Bytes(10, 1)).ok());
  ASSERT_TRUE(handler_.WaitBlocked(1));
  // Sent while request 1 is still in the handler (on a worker).
  ASSERT_TRUE(SendRequest(fd, kInlineEcho, 2, Bytes(20, 2)).ok());
  ASSERT_TRUE(SendRequest(fd, kInlineEcho, 3, Bytes(30, 3)).ok());
  // Other connections' inline requests are answered meanwhile.
  RawSession other = Connect();
  ASSERT_TRUE(SendRequest(other, kInlineEcho, 9, Bytes(5, 9)).ok());
  auto o = ReadFrame(other.get(), other.s.recv, Soon());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->header.request_id, 9u);
  handler_.Release();
  for (uint64_t id = 1; id <= 3; ++id) {
    auto r = ReadFrame(fd.get(), fd.s.recv, Soon());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->header.request_id, id);  // request order, not finish order
    EXPECT_EQ(r->payload, Bytes(id * 10, static_cast<uint32_t>(id)));
  }
  auto c = server_->counters();
  EXPECT_EQ(c.requests, 4u);
  if (GetParam() == Loop::kUring) {
    EXPECT_EQ(c.inline_requests, 3u);
    EXPECT_EQ(handler_.InlineThreads(), 1u);
  } else {
    EXPECT_EQ(c.inline_requests, 0u);  // the poll loop has no workers
  }
  RawSession again = Connect();
  EXPECT_TRUE(EchoOn(again, 10, 10, 10));  // worker requests still work
}

// A bad tag on a frame the loop would run inline gets what any bad frame
// gets: the good frames before it answered, then a reject frame, the close,
// and the count.
TEST_P(RpcServerLoopTest, InlineFrameWithBadMacIsRejectedAndClosed) {
  RawSession fd = Connect();
  std::vector<uint8_t> stream;
  for (uint64_t id = 1; id <= 3; ++id) {
    FrameHeader h;
    h.type = kInlineEcho;
    h.request_id = id;
    auto w = EncodeFrame(fd.s.send, h, Bytes(20, id), {});
    stream.insert(stream.end(), w.begin(), w.end());
  }
  // Right key, wrong sequence number (a replay of frame 3's number).
  FrameHeader bad_h;
  bad_h.type = kInlineEcho;
  bad_h.request_id = 4;
  testing::Link wrong = testing::MakeLink(*TestKey(9));
  auto bad = EncodeFrame(wrong.tx, bad_h, Bytes(20, 9), {});
  stream.insert(stream.end(), bad.begin(), bad.end());
  // A good-looking frame after the bad one must never be handled.
  FrameHeader after;
  after.type = kInlineEcho;
  after.request_id = 5;
  auto w5 = EncodeFrame(fd.s.send, after, Bytes(20, 5), {});
  stream.insert(stream.end(), w5.begin(), w5.end());
  ASSERT_EQ(::send(fd.get(), stream.data(), stream.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(stream.size()));
  ExpectRepliesThenRejectAndClose(fd, 3);
  auto c = server_->counters();
  EXPECT_EQ(c.rejected_bad_mac, 1u);
  EXPECT_EQ(c.requests, 3u);
  EXPECT_EQ(c.inline_requests, GetParam() == Loop::kUring ? 3u : 0u);
  EXPECT_TRUE(
      Eventually([&] { return server_->counters().open_connections == 0; }));
}

// A response frame sent to the server, on the inline path: refused and
// closed without an answer, as on a worker.
TEST_P(RpcServerLoopTest, InlineResponseFrameToServerClosesConnection) {
  RawSession fd = Connect();
  FrameHeader h;
  h.type = kInlineEcho;
  h.request_id = 1;
  h.flags = kFlagResponse;
  ASSERT_TRUE(WriteFrame(fd.get(), fd.s.send, h, Bytes(8, 1), {}, Soon()).ok());
  EXPECT_TRUE(ClosedByPeer(fd.get()));
  EXPECT_EQ(server_->counters().requests, 0u);
  RawSession other = Connect();
  EXPECT_TRUE(EchoOn(other, 2, 10, 10));
}

// A client that pipelines inline requests as fast as it can write gets a
// bounded share of the loop thread: other connections' inline and worker
// calls all complete while the flood goes on, and the flood's replies are
// still in order.
TEST_P(RpcServerLoopTest, FloodOfInlineRequestsDoesNotStarveOthers) {
  RawSession flood = Connect();
  std::atomic<bool> others_done{false}, writer_done{false};
  std::atomic<uint64_t> flood_sent{0}, flood_answered{0};
  std::atomic<bool> flood_bad{false};
  std::thread writer([&] {
    FrameHeader h;
    h.type = kInlineEcho;
    auto p = Bytes(64, 1);
    for (uint64_t id = 0; !others_done.load(); ++id) {
      h.request_id = id;
      if (!WriteFrame(flood.get(), flood.s.send, h, p, {}, Soon()).ok()) {
        flood_bad = true;
        break;
      }
      ++flood_sent;
    }
    writer_done = true;
  });
  std::thread reader([&] {
    for (uint64_t id = 0;; ++id) {
      // Read only replies that are due: frame `id` has been written.
      while (id == flood_sent.load()) {
        if (writer_done.load() && id == flood_sent.load()) return;
        if (flood_bad.load()) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      auto r = ReadFrame(flood.get(), flood.s.recv, Soon());
      if (!r.ok() || r->header.request_id != id) {
        flood_bad = true;
        return;
      }
      ++flood_answered;
    }
  });
  // The flood is under way before the others start.
  ASSERT_TRUE(Eventually([&] { return flood_answered.load() >= 100; }));
  std::atomic<int> bad{0};
  std::vector<std::thread> others;
  for (int t = 0; t < 4; ++t) {
    others.emplace_back([&, t] {
      RpcClientOptions co;
      co.call_timeout = std::chrono::seconds(60);
      RpcClient c(server_->address(), key_, co);
      for (int i = 0; i < 50; ++i) {
        auto b = Bytes(100 + i, t * 100 + i);
        auto r = c.Call(i % 2 ? kInlineEcho : kEcho, b, b);
        if (!r.ok() || r->payload != b || r->bulk != b) ++bad;
      }
    });
  }
  for (auto& th : others) th.join();
  const uint64_t during = flood_answered.load();
  others_done = true;
  writer.join();
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_FALSE(flood_bad.load());
  EXPECT_GT(during, 100u);  // the flood was being served all along
  EXPECT_EQ(flood_answered.load(), flood_sent.load());
  if (GetParam() == Loop::kUring) {
    EXPECT_GE(server_->counters().inline_requests, during + 100);
  }
}

TEST_P(RpcServerLoopTest, ConnectionCapRefusesExtraConnections) {
  server_->Stop();
  server_.reset();
  Start(/*max_connections=*/3);
  if (IsSkipped()) return;
  std::vector<RawSession> fds;
  for (int i = 0; i < 3; ++i) {
    fds.push_back(Connect());
    ASSERT_TRUE(EchoOn(fds.back(), i, 5, 5));
  }
  UniqueFd extra = ConnectRaw();
  EXPECT_TRUE(ClosedByPeer(extra.get()));
  EXPECT_EQ(server_->counters().open_connections, 3u);
  fds.pop_back();  // one leaves: a new one gets in
  EXPECT_TRUE(
      Eventually([&] { return server_->counters().open_connections == 2; }));
  RawSession next = Connect();
  EXPECT_TRUE(EchoOn(next, 9, 5, 5));
}

TEST_P(RpcServerLoopTest, StopWithConnectionsOpenLeaksNothing) {
  std::vector<RawSession> clients;
  for (int i = 0; i < 8; ++i) {  // idle, after one call each
    clients.push_back(Connect());
    ASSERT_TRUE(EchoOn(clients.back(), i, 10, 10));
  }
  clients.push_back(Connect());  // mid-frame
  auto wire =
      EncodeFrame(clients.back().s.send, FrameHeader{}, Bytes(9000, 1), {});
  ASSERT_GT(::send(clients.back().get(), wire.data(), 100, MSG_NOSIGNAL), 0);
  clients.push_back(Connect());  // a hog whose reply cannot be sent
  auto big = Bytes(4 << 20, 2);
  FrameHeader h;
  h.type = kEcho;
  for (int i = 0; i < 16; ++i) {
    h.request_id = i;
    if (!WriteFrame(clients.back().get(), clients.back().s.send, h, {}, big,
                    Clock::now() + std::chrono::milliseconds(500))
             .ok())
      break;  // the server stopped reading from us
  }
  clients.push_back(Connect());  // a handler call in progress
  ASSERT_TRUE(SendRequest(clients.back(), kBlock, 1, {}, {}).ok());
  ASSERT_TRUE(handler_.WaitBlocked(1));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    handler_.Release();  // Stop() waits for the call in progress
  });
  server_->Stop();
  releaser.join();
  server_.reset();
  for (auto& c : clients) EXPECT_TRUE(ClosedByPeer(c.get()));
  clients.clear();
  EXPECT_EQ(CountFds(), baseline_fds_);
  EXPECT_EQ(CountThreads(), baseline_threads_);
}

TEST_P(RpcServerLoopTest, RestartOnTheSamePortWorks) {
  std::string addr = server_->address();
  server_->Stop();
  server_.reset();
  RpcServerOptions o;
  o.listen = addr;
  o.use_io_uring = GetParam() == Loop::kUring;
  auto s = RpcServer::Start(o, key_, &handler_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  server_ = std::move(s).value();
  RawSession fd = Connect();
  EXPECT_TRUE(EchoOn(fd, 1, 1, 1));
}

INSTANTIATE_TEST_SUITE_P(Loops, RpcServerLoopTest,
                         ::testing::Values(Loop::kUring, Loop::kPoll),
                         [](const auto& p) {
                           return p.param == Loop::kUring ? "uring" : "poll";
                         });

// io_uring_setup refused with EPERM (what the io_uring_disabled sysctl
// does) on the thread that starts the server and its children: the server
// logs that it falls back and serves with the poll loop.
TEST(RpcServerFallbackTest, IoUringRefusedFallsBackToPollWithALogLine) {
  EchoHandler handler;
  auto key = TestKey(5);
  std::unique_ptr<RpcServer> server;
  std::string log;
  std::thread t([&] {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
    // Without SECCOMP_FILTER_FLAG_TSYNC: only this thread (and threads it
    // creates: the server's) is filtered, not the rest of the test.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
      log = "seccomp unavailable";
      return;
    }
    RpcServerOptions o;
    o.log_name = "fallback-test";
    ::testing::internal::CaptureStderr();
    auto s = RpcServer::Start(o, key, &handler);
    log = ::testing::internal::GetCapturedStderr();
    if (s.ok()) server = std::move(s).value();
  });
  t.join();
  if (log == "seccomp unavailable")
    GTEST_SKIP() << "cannot install a seccomp filter here; fallback untested";
  ASSERT_TRUE(server);
  EXPECT_FALSE(server->using_io_uring());
  EXPECT_NE(log.find("fallback-test: io_uring unavailable"), std::string::npos)
      << log;
  EXPECT_NE(log.find("poll"), std::string::npos) << log;
  RpcClient c(server->address(), key);
  auto b = Bytes(5000, 1);
  auto r = c.Call(kEcho, {}, b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bulk, b);
  server->Stop();
}

TEST(RpcServerFallbackTest, DefaultServerUsesIoUringWhenAvailable) {
  EchoHandler handler;
  RpcServerOptions o;
  o.log_name = "default-test";
  ::testing::internal::CaptureStderr();
  auto s = RpcServer::Start(o, TestKey(1), &handler);
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok());
  if (std::string why = IoUringRefusedReason(); !why.empty()) {
    GTEST_SKIP() << why << " (server log: " << log << ")";
  }
  EXPECT_EQ(log, "");  // nothing to say when io_uring works
  EXPECT_TRUE((*s)->using_io_uring()) << "the default server runs the poll loop";
  EXPECT_EQ((*s)->address().rfind("127.0.0.1:", 0), 0u);
}

}  // namespace
}  // namespace stripefs::rpc

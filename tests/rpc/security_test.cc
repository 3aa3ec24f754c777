// Regression tests of issue 11 items 1-3, against an in-process RpcServer
// serving an in-memory ChunkService (both server loops):
//  - a DeleteChunk captured from a real RpcClient connection (through a
//    recording proxy) and sent verbatim on a fresh connection is refused
//    and changes nothing; its frame is refused on another session too;
//  - a frame replayed or reordered within its own connection is refused;
//  - a connection relayed to another chunkd fails the handshake;
//  - a client identity cannot change the map or delete whole chunks; a
//    removed one is refused on its next call; a read-only one cannot
//    change anything;
//  - 2,000 idle connections do not lock a legitimate client out, and idle
//    connections are closed after the handshake / idle timeout.
// The pre-auth memory bound is tested against a real chunkd process in
// cluster_process_test.cc.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>

#include "backend/meta/meta_store.h"
#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/chunk_service_server.h"
#include "backend/rpc/meta_service_server.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/remote_meta_service.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/server_core.h"
#include "backend/rpc/tcp_socket.h"
#include "backend/rpc/wire_messages.h"
#include "tests/rpc/fake_services.h"
#include "tests/rpc/raw_session.h"
#include "tests/rpc/test_sessions.h"
#include "tests/support/eventually.h"
#include "tests/support/io_uring_probe.h"

namespace stripefs::rpc {
namespace {

using testing::MemoryChunkService;
using testing::OpenRawSession;
using testing::RawSession;
using testing::TestKey;

Deadline Soon() { return Clock::now() + std::chrono::seconds(20); }

// Polls for at most ~60 s; never a timing check.
template <typename F>
bool Eventually(F pred) {
  return testing::Eventually(pred, std::chrono::seconds(60));
}

// Everything the peer sends until it closes (bounded by ~20 s).
std::vector<uint8_t> ReadUntilClosed(int fd) {
  std::vector<uint8_t> got;
  for (int i = 0; i < 2000; ++i) {
    uint8_t buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      got.insert(got.end(), buf, buf + n);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) break;
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 10);
  }
  return got;
}

bool ClosedByPeer(int fd) {
  ReadUntilClosed(fd);
  uint8_t b;
  ssize_t n = ::recv(fd, &b, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

void SendAllBytes(int fd, std::span<const uint8_t> bytes) {
  size_t off = 0;
  for (int i = 0; off < bytes.size() && i < 100000; ++i) {
    ssize_t n =
        ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n > 0) off += static_cast<size_t>(n);
    if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    if (n < 0) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 10);
    }
  }
  ASSERT_EQ(off, bytes.size());
}

// A TCP proxy for one connection at a time that records every byte the
// client sends, and every byte the server sends back (what an eavesdropper
// on the wire would capture).
class RecordingProxy {
 public:
  explicit RecordingProxy(std::string target) : target_(std::move(target)) {
    auto l = ListenTcp("127.0.0.1:0", &address_);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) listen_ = std::move(l).value();
    thread_ = std::thread([this] { Run(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    thread_.join();
  }
  const std::string& address() const { return address_; }
  std::vector<uint8_t> captured() {
    std::lock_guard<std::mutex> l(mu_);
    return up_;
  }
  std::vector<uint8_t> captured_down() {
    std::lock_guard<std::mutex> l(mu_);
    return down_;
  }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{listen_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      UniqueFd client(::accept4(listen_.get(), nullptr, nullptr,
                                SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!client.valid()) continue;
      auto server = ConnectTcp(target_, Soon());
      if (!server.ok()) continue;
      Pipe(client.get(), server->get());
    }
  }
  // Copies both ways until either side closes or the proxy stops.
  void Pipe(int c, int s) {
    while (!stop_) {
      pollfd p[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        uint8_t buf[65536];
        ssize_t n = ::recv(p[i].fd, buf, sizeof(buf), 0);
        if (n <= 0) return;
        {
          std::lock_guard<std::mutex> l(mu_);
          auto& to = i == 0 ? up_ : down_;
          to.insert(to.end(), buf, buf + n);
        }
        SendAllBytes(i == 0 ? s : c, std::span<const uint8_t>(buf, n));
      }
    }
  }

  std::string target_, address_;
  UniqueFd listen_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<uint8_t> up_, down_;
};

enum class Loop { kUring, kPoll };

class SecurityTest : public ::testing::TestWithParam<Loop> {
 protected:
  void SetUp() override { key_ = TestKey(11); }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  void Start(RpcServerOptions o = {}, bool secure = false) {
    o.log_name = "security-test";
    o.use_io_uring = GetParam() == Loop::kUring;
    handler_ = std::make_unique<ChunkServiceServer>(&store_);
    auto s = RpcServer::Start(o, key_->WithSecureWire(secure), handler_.get());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    if (GetParam() == Loop::kUring) {
      // Skip only on the machine's refusal; a server that falls back to poll
      // by itself fails the io_uring case.
      if (std::string why = testing::IoUringRefusedReason(); !why.empty())
        GTEST_SKIP() << why;
      ASSERT_TRUE(server_->using_io_uring())
          << "io_uring works here but the server runs the poll loop";
    }
  }
  bool Present(const ChunkId& id, uint64_t version) {
    return store_.ReadChunk(id, version, 0, 4).ok();
  }

  MemoryChunkService store_;
  std::unique_ptr<ChunkServiceServer> handler_;
  std::shared_ptr<const ClusterKey> key_;
  std::unique_ptr<RpcServer> server_;
  const std::vector<uint8_t> data_ = std::vector<uint8_t>(4096, 0x42);
};

std::vector<uint8_t> DeleteRequest(const ChunkId& id, uint64_t keep) {
  return EncodeRequest<MsgType::kDeleteChunk>({id, keep});
}

TEST_P(SecurityTest, CapturedDeleteReplayedOnAFreshConnectionChangesNothing) {
  Start();
  if (IsSkipped()) return;
  RemoteChunkService direct(server_->address(), key_);
  const ChunkId a{7, 0, 1};
  ASSERT_TRUE(direct.WriteChunk(a, 1, data_).ok());
  std::vector<uint8_t> captured;
  {
    RecordingProxy proxy(server_->address());
    RemoteChunkService via(proxy.address(), key_);
    ASSERT_TRUE(via.DeleteChunk(a, /*keep_version=*/2).ok());
    ASSERT_FALSE(Present(a, 1));
    captured = proxy.captured();
  }
  ASSERT_FALSE(captured.empty());
  // The file is rewritten; then the attacker replays what it captured.
  ASSERT_TRUE(direct.WriteChunk(a, 1, data_).ok());
  auto before = server_->counters();
  auto fd = ConnectTcp(server_->address(), Soon());
  ASSERT_TRUE(fd.ok());
  SendAllBytes(fd->get(), captured);
  std::vector<uint8_t> answer = ReadUntilClosed(fd->get());
  // The server answered with its hello and then a reject, nothing else.
  ASSERT_EQ(answer.size(), kServerHelloSize + kRejectFrameSize);
  FrameHeader rh;
  ASSERT_TRUE(ParseHeader(std::span<const uint8_t>(answer).subspan(
                              kServerHelloSize, kFrameHeaderSize),
                          &rh)
                  .ok());
  EXPECT_TRUE(rh.flags & kFlagReject);
  EXPECT_EQ(rh.type, static_cast<uint16_t>(FrameError::kBadHandshake));
  EXPECT_TRUE(Present(a, 1)) << "the replayed DeleteChunk was executed";
  EXPECT_TRUE(Eventually([&] {
    return server_->counters().rejected_bad_handshake ==
           before.rejected_bad_handshake + 1;
  }));
  EXPECT_EQ(server_->counters().requests, before.requests);

  // The captured frame alone, on another (legitimate) session: its tag is
  // under the other connection's key, so it fails too.
  size_t frame_at = kClientHelloSize + kClientProofSize;
  ASSERT_GT(captured.size(), frame_at);
  auto other = OpenRawSession(server_->address(), *key_);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  SendAllBytes(other->get(),
               std::span<const uint8_t>(captured).subspan(frame_at));
  auto r = ReadFrame(other->get(), other->s.recv, Soon());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EACCES);  // the server's reject frame
  EXPECT_TRUE(ClosedByPeer(other->get()));
  EXPECT_TRUE(Present(a, 1));
  EXPECT_EQ(server_->counters().rejected_bad_mac, before.rejected_bad_mac + 1);
}

// Issue 35 hole 3: a man in the middle relays a client's connection meant
// for chunkd 1 to chunkd 2 (same cluster key, so both proofs are genuine).
// The ServerHello says "chunkd 2" under the server's proof, so the client
// refuses before any frame: nothing is written on chunkd 2.
TEST_P(SecurityTest, ConnectionRelayedToAnotherChunkdFailsTheHandshake) {
  RpcServerOptions o;
  o.binding = {ServerRole::kChunkd, 1};
  Start(o);
  if (IsSkipped()) return;
  MemoryChunkService other_store;
  ChunkServiceServer other_handler(&other_store);
  RpcServerOptions bo;
  bo.log_name = "security-test-b";
  bo.use_io_uring = GetParam() == Loop::kUring;
  bo.binding = {ServerRole::kChunkd, 2};
  auto b = RpcServer::Start(bo, key_, &other_handler);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  RpcClientOptions meant_for_1 = RemoteChunkService::DefaultOptions();
  meant_for_1.expected_server = {ServerRole::kChunkd, 1};
  const ChunkId a{9, 0, 1};
  {
    RecordingProxy relay((*b)->address());
    RemoteChunkService via(relay.address(), key_, meant_for_1);
    Status w = via.WriteChunk(a, 1, data_);
    EXPECT_EQ(w.code(), EACCES) << w.ToString();
    EXPECT_NE(w.message().find("reached chunkd 2, expected chunkd 1"),
              std::string::npos)
        << w.ToString();
    // Only the client's hello crossed the relay: no proof, no frame.
    EXPECT_TRUE(Eventually([&] {
      return relay.captured().size() == kClientHelloSize;
    })) << relay.captured().size()
        << " bytes";
  }
  EXPECT_FALSE(other_store.ReadChunk(a, 1, 0, 4).ok())
      << "the relayed write landed on chunkd 2";
  EXPECT_EQ((*b)->counters().requests, 0u);
  // The client reaches chunkd 1 itself, directly.
  RemoteChunkService direct(server_->address(), key_, meant_for_1);
  EXPECT_TRUE(direct.WriteChunk(a, 1, data_).ok());
  EXPECT_TRUE(Present(a, 1));
  (*b)->Stop();
}

// Issue 35 hole 3, across volumes: two clusters (or volumes) that share a
// key and server ids are told apart by the volume UUID in the ServerHello.
// A relay from chunkd 1 of volume A to chunkd 1 of volume B fails the
// client's check before any frame; a client that was given no volume pins
// the one its first server names.
TEST_P(SecurityTest, ConnectionToAServerOfAnotherVolumeFailsTheHandshake) {
  VolumeId vol_a, vol_b;
  vol_a.fill(0xaa);
  vol_b.fill(0xbb);
  RpcServerOptions o;
  o.binding = {ServerRole::kChunkd, 1, vol_a};
  Start(o);
  if (IsSkipped()) return;
  MemoryChunkService other_store;
  ChunkServiceServer other_handler(&other_store);
  RpcServerOptions bo;
  bo.log_name = "security-test-b";
  bo.use_io_uring = GetParam() == Loop::kUring;
  bo.binding = {ServerRole::kChunkd, 1, vol_b};
  auto b = RpcServer::Start(bo, key_, &other_handler);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  RpcClientOptions meant = RemoteChunkService::DefaultOptions();
  meant.expected_server = {ServerRole::kChunkd, 1, vol_a};
  const ChunkId a{9, 0, 1};
  {
    RecordingProxy relay((*b)->address());
    RemoteChunkService via(relay.address(), key_, meant);
    Status w = via.WriteChunk(a, 1, data_);
    EXPECT_EQ(w.code(), EACCES) << w.ToString();
    EXPECT_NE(w.message().find("of volume " + VolumeIdHex(vol_b) +
                               ", expected volume " + VolumeIdHex(vol_a)),
              std::string::npos)
        << w.ToString();
    EXPECT_TRUE(Eventually([&] {
      return relay.captured().size() == kClientHelloSize;
    })) << relay.captured().size()
        << " bytes";
  }
  EXPECT_FALSE(other_store.ReadChunk(a, 1, 0, 4).ok())
      << "the relayed write landed on the other volume's chunkd";
  EXPECT_EQ((*b)->counters().requests, 0u);
  RemoteChunkService direct(server_->address(), key_, meant);
  EXPECT_TRUE(direct.WriteChunk(a, 1, data_).ok());

  // Pinning: no volume given, the first server's is kept and expected.
  RemoteChunkService learner(server_->address(), key_);
  ASSERT_TRUE(learner.Ping().ok());
  EXPECT_EQ(learner.client().volume(), vol_a);
  (*b)->Stop();
}

// Issue 35 hole 2: a client identity's key no longer gives every power.
// The dispatch tables' identity column refuses cluster-map and whole-chunk
// calls from client sessions (EPERM, nothing runs); the admin identity and
// the server key may send them.
TEST_P(SecurityTest, ClientIdentityCannotChangeTheMapOrDeleteWholeChunks) {
  Start();
  if (IsSkipped()) return;
  testing::ScriptedMetaService meta;
  MetaServiceServer meta_handler(&meta);
  RpcServerOptions mo;
  mo.log_name = "security-test-metad";
  mo.use_io_uring = GetParam() == Loop::kUring;
  auto metad = RpcServer::Start(mo, key_, &meta_handler);
  ASSERT_TRUE(metad.ok()) << metad.status().ToString();
  auto alice = key_->NewIdentity("client.alice");
  auto ops = key_->NewIdentity("admin.ops");
  ASSERT_TRUE(alice.ok() && ops.ok());
  auto alice_key = std::make_shared<const ClusterKey>(*alice);
  auto ops_key = std::make_shared<const ClusterKey>(*ops);

  RemoteMetaService as_alice((*metad)->address(), alice_key);
  ServerInfo evil{1, "127.0.0.1:9", "evil", ServerState::kUp};
  Status up = as_alice.UpsertServer(evil);
  EXPECT_EQ(up.code(), EPERM) << up.ToString();
  EXPECT_NE(up.message().find("not by client.alice"), std::string::npos)
      << up.ToString();
  Status st = as_alice.SetServerState(1, ServerState::kOut);
  EXPECT_EQ(st.code(), EPERM) << st.ToString();
  EXPECT_EQ(meta.last_call(), "") << "a refused call reached the service";
  // Namespace calls are a client's business.
  meta.Script(InodeAttr{});
  EXPECT_TRUE(as_alice.GetAttr(1).ok());
  EXPECT_EQ(meta.last_call(), "GetAttr");

  const ChunkId a{5, 0, 2};
  RemoteChunkService chunk_alice(server_->address(), alice_key);
  ASSERT_TRUE(chunk_alice.WriteChunk(a, 1, data_).ok());
  Status del = chunk_alice.DeleteChunk(a, /*keep_version=*/0);
  EXPECT_EQ(del.code(), EPERM) << del.ToString();
  EXPECT_TRUE(Present(a, 1)) << "the client's DeleteChunk ran";
  EXPECT_FALSE(chunk_alice.ListChunks({}, 10).ok());

  // The operators may.
  RemoteMetaService as_ops((*metad)->address(), ops_key);
  EXPECT_TRUE(as_ops.UpsertServer(evil).ok());
  EXPECT_EQ(meta.last_call(), "UpsertServer");
  RemoteChunkService chunk_ops(server_->address(), ops_key);
  EXPECT_TRUE(chunk_ops.DeleteChunk(a, 0).ok());
  EXPECT_FALSE(Present(a, 1));
  (*metad)->Stop();
}

// A metad (scripted service) with an identity table, as `stripefs metad`
// runs it: the table is the server's gate and serves `stripefs auth`.
struct MetadWithIdentities {
  explicit MetadWithIdentities(std::shared_ptr<const ClusterKey> key,
                               Loop loop) {
    file = ::testing::TempDir() + "/identities-" + std::to_string(getpid()) +
           "-" + std::to_string(counter++);
    ::unlink(file.c_str());
    auto t = IdentityTable::Open(file);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    table = std::move(t).value();
    handler.ServeIdentities(table.get(), key);
    RpcServerOptions o;
    o.log_name = "security-test-metad";
    o.use_io_uring = loop == Loop::kUring;
    o.gate = table.get();
    auto s = RpcServer::Start(o, key, &handler);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    server = std::move(s).value();
  }
  ~MetadWithIdentities() {
    server->Stop();
    ::unlink(file.c_str());
  }
  static inline int counter = 0;
  std::string file;
  testing::ScriptedMetaService meta;
  std::unique_ptr<IdentityTable> table;
  MetaServiceServer handler{&meta};
  std::unique_ptr<RpcServer> server;
};

// Issue 35 hole 2: `stripefs auth rm` takes effect at once. The removed
// client's open (authenticated, pooled) session is refused on its next
// call, and a new connection fails the handshake; no restart.
TEST_P(SecurityTest, RemovedClientIsRefusedOnItsNextCall) {
  MetadWithIdentities metad(key_, GetParam());
  RemoteMetaService as_server(metad.server->address(), key_);
  auto carol = as_server.AuthAdd({"client.carol", "/", false});
  ASSERT_TRUE(carol.ok()) << carol.status().ToString();
  auto carol_key = std::make_shared<const ClusterKey>(*carol);
  RemoteMetaService as_carol(metad.server->address(), carol_key);
  metad.meta.Script(InodeAttr{});
  ASSERT_TRUE(as_carol.GetAttr(1).ok());
  auto listed = as_server.AuthList();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].entity, "client.carol");
  // A client may not manage identities.
  EXPECT_EQ(as_carol.AuthRemove("client.carol").code(), EPERM);

  ASSERT_TRUE(as_server.AuthRemove("client.carol").ok());
  metad.meta.Script(InodeAttr{});
  Status next = as_carol.GetAttr(1).status();
  EXPECT_EQ(next.code(), EKEYREVOKED) << next.ToString();
  EXPECT_NE(next.message().find("client.carol"), std::string::npos);
  RemoteMetaService fresh(metad.server->address(), carol_key);
  Status hs = fresh.GetAttr(1).status();
  EXPECT_EQ(hs.code(), EACCES) << hs.ToString();
  // Added again, the name gets a new key: the old file stays refused.
  auto again = as_server.AuthAdd({"client.carol", "/", false});
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->salt(), carol->salt());
  RemoteMetaService old_file(metad.server->address(), carol_key);
  EXPECT_EQ(old_file.GetAttr(1).status().code(), EACCES);
}

// Issue 35 hole 2: removing a client closes its open sessions at once,
// not only on its next call: an idle authenticated connection of the
// identity is closed by the server, while another identity's stays open.
TEST_P(SecurityTest, RemovingAClientClosesItsOpenSessions) {
  MetadWithIdentities metad(key_, GetParam());
  metad.handler.OnIdentityRemoved(
      [&](const std::string& entity, const EntitySalt&) {
        metad.server->CloseSessionsOf(entity);
      });
  RemoteMetaService as_server(metad.server->address(), key_);
  auto dave = as_server.AuthAdd({"client.dave", "/", false});
  auto erin = as_server.AuthAdd({"client.erin", "/", false});
  ASSERT_TRUE(dave.ok() && erin.ok());
  auto dave_conn = OpenRawSession(metad.server->address(), *dave);
  auto erin_conn = OpenRawSession(metad.server->address(), *erin);
  ASSERT_TRUE(dave_conn.ok()) << dave_conn.status().ToString();
  ASSERT_TRUE(erin_conn.ok()) << erin_conn.status().ToString();
  ASSERT_TRUE(as_server.AuthRemove("client.dave").ok());
  EXPECT_TRUE(ClosedByPeer(dave_conn->get()))
      << "the removed identity's session stayed open";
  // erin's session is untouched: nothing to read, still open.
  uint8_t b;
  EXPECT_EQ(::recv(erin_conn->get(), &b, 1, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
}

// Issue 35 hole 2: a client given --path /a reaches nothing outside /a,
// against a real MetaStore: no lookup, listing, stat, write, rename across
// the boundary, link or xattr outside, even by an inode number it forges;
// inside /a everything works, and the mount's walk from "/" down to /a is
// allowed (the next component only).
TEST_P(SecurityTest, ClientLimitedToAPathReachesNothingOutsideIt) {
  const std::string dir = ::testing::TempDir() + "/subtree-" +
                          std::to_string(getpid()) + "-" +
                          std::to_string(static_cast<int>(GetParam()));
  std::filesystem::remove_all(dir);
  auto store = MetaStore::Create(dir, Geometry{4, 2, 4096});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  MetaService& s = **store;
  auto a = s.Mkdir(kRootInode, "a", 0755, 0, 0);
  auto b = s.Mkdir(kRootInode, "b", 0755, 0, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  auto secret = s.MkNode(b->ino, "secret", S_IFREG | 0644, 0, 0, 0);
  auto bsub = s.Mkdir(b->ino, "sub", 0755, 0, 0);
  auto mine = s.MkNode(a->ino, "mine", S_IFREG | 0644, 0, 0, 0);
  ASSERT_TRUE(secret.ok() && bsub.ok() && mine.ok());

  auto file = ::testing::TempDir() + "/subtree-ids-" +
              std::to_string(getpid()) + "-" +
              std::to_string(static_cast<int>(GetParam()));
  ::unlink(file.c_str());
  auto table = IdentityTable::Open(file);
  ASSERT_TRUE(table.ok());
  MetaServiceServer handler(&s);
  handler.ServeIdentities(table->get(), key_);
  RpcServerOptions o;
  o.log_name = "security-test-metad";
  o.use_io_uring = GetParam() == Loop::kUring;
  o.gate = table->get();
  auto server = RpcServer::Start(o, key_, &handler);
  ASSERT_TRUE(server.ok());
  RemoteMetaService as_server((*server)->address(), key_);
  auto alice = as_server.AuthAdd({"client.alice", "/a", false});
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  RemoteMetaService c((*server)->address(),
                      std::make_shared<const ClusterKey>(*alice));
  auto refused = [](const Status& st) {
    return st.code() == EACCES ? ::testing::AssertionSuccess()
                               : ::testing::AssertionFailure() << st.ToString();
  };

  // The walk down: "/" may be stat'ed, and "a" looked up in it; nothing
  // else there.
  EXPECT_TRUE(c.GetAttr(kRootInode).ok());
  auto got_a = c.Lookup(kRootInode, "a");
  ASSERT_TRUE(got_a.ok()) << got_a.status().ToString();
  EXPECT_EQ(got_a->ino, a->ino);
  EXPECT_TRUE(refused(c.Lookup(kRootInode, "b").status()));
  EXPECT_TRUE(refused(c.Lookup(kRootInode, "nothing-here").status()));
  EXPECT_TRUE(refused(c.ReadDir(kRootInode, 0, 100).status()));
  EXPECT_TRUE(refused(c.Mkdir(kRootInode, "x", 0755, 0, 0).status()));
  EXPECT_TRUE(refused(c.Lookup(a->ino, "..").status()));

  // Inside: everything works.
  EXPECT_TRUE(c.ReadDir(a->ino, 0, 100).ok());
  auto f = c.Lookup(a->ino, "mine");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(c.GetAttr(f->ino).ok());
  EXPECT_TRUE(c.SetXattr(f->ino, "user.k", "v", 0).ok());
  auto made = c.Mkdir(a->ino, "d", 0755, 0, 0);
  ASSERT_TRUE(made.ok());
  auto created = c.MkNode(made->ino, "new", S_IFREG | 0644, 0, 0, 0);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(c.GetStripes(created->ino, 0, 4).ok());
  EXPECT_TRUE(c.Rename(made->ino, "new", a->ino, "moved", 0, nullptr).ok());

  // Outside, by forged numbers: read, list, stat, write, xattrs, stripes.
  EXPECT_TRUE(refused(c.GetAttr(b->ino).status()));
  EXPECT_TRUE(refused(c.GetAttr(secret->ino).status()));
  EXPECT_TRUE(refused(c.GetAttr(bsub->ino).status()));
  EXPECT_TRUE(refused(c.ReadDir(b->ino, 0, 100).status()));
  EXPECT_TRUE(refused(c.Lookup(b->ino, "secret").status()));
  EXPECT_TRUE(refused(c.Lookup(b->ino, "absent").status()));
  EXPECT_TRUE(refused(c.GetStripes(secret->ino, 0, 4).status()));
  EXPECT_TRUE(refused(c.GetXattr(secret->ino, "user.k").status()));
  EXPECT_TRUE(refused(c.SetXattr(secret->ino, "user.k", "v", 0)));
  SetAttrRequest chmod;
  chmod.mask = kSetMode;
  chmod.mode = 0777;
  EXPECT_TRUE(refused(c.SetAttr(secret->ino, chmod, nullptr).status()));
  EXPECT_TRUE(refused(c.SetAttr(b->ino, chmod, nullptr).status()));
  EXPECT_TRUE(refused(
      c.MkNode(b->ino, "planted", S_IFREG | 0644, 0, 0, 0).status()));
  EXPECT_TRUE(refused(c.Mkdir(bsub->ino, "planted", 0755, 0, 0).status()));
  EXPECT_TRUE(refused(c.Unlink(b->ino, "secret").status()));
  EXPECT_TRUE(refused(c.Rmdir(b->ino, "sub")));
  EXPECT_TRUE(refused(c.PurgeInode(secret->ino, nullptr)));
  EXPECT_TRUE(refused(c.DropStripes(secret->ino, 0, 1, nullptr)));
  EXPECT_TRUE(refused(c.DropStripesKeepTimes(secret->ino, 0, 1, nullptr)));
  const std::vector<StripeCommit> commit = {{{0, 1, 0, 4096}, 0}};
  EXPECT_TRUE(refused(c.CommitStripes(secret->ino, commit, 4096, nullptr)));
  EXPECT_TRUE(
      refused(c.CommitStripesKeepTimes(secret->ino, commit, 4096, nullptr)));
  // Renames across the boundary, both ways, and links of or into outside.
  EXPECT_TRUE(refused(c.Rename(b->ino, "secret", a->ino, "stolen", 0, nullptr)));
  EXPECT_TRUE(refused(c.Rename(a->ino, "mine", b->ino, "leaked", 0, nullptr)));
  EXPECT_TRUE(refused(c.Link(secret->ino, a->ino, "stolen").status()));
  EXPECT_TRUE(refused(c.Link(f->ino, b->ino, "leaked").status()));
  auto orphans = c.ListOrphans();
  ASSERT_TRUE(orphans.ok());

  // Nothing outside changed.
  auto still = s.GetAttr(secret->ino);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->mode & 07777, 0644u);
  EXPECT_EQ(still->size, 0u);
  EXPECT_TRUE(s.Lookup(b->ino, "secret").ok());
  EXPECT_FALSE(s.Lookup(b->ino, "leaked").ok());
  EXPECT_FALSE(s.Lookup(b->ino, "planted").ok());
  EXPECT_FALSE(s.Lookup(a->ino, "stolen").ok());
  EXPECT_TRUE(s.Lookup(a->ino, "mine").ok());
  // A directory moved out of /a by the server is out at once.
  ASSERT_TRUE(s.Rename(a->ino, "d", b->ino, "d-out", 0, nullptr).ok());
  EXPECT_TRUE(refused(c.ReadDir(made->ino, 0, 100).status()));
  // The server key and an unlimited client are not held to /a.
  EXPECT_TRUE(as_server.GetAttr(secret->ino).ok());
  (*server)->Stop();
  ::unlink(file.c_str());
  store->reset();
  std::filesystem::remove_all(dir);
}

TEST_P(SecurityTest, ReadOnlyClientMayReadButNotChange) {
  MetadWithIdentities metad(key_, GetParam());
  RemoteMetaService as_server(metad.server->address(), key_);
  auto ro = as_server.AuthAdd({"client.reader", "/", true});
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  RemoteMetaService reader(metad.server->address(),
                           std::make_shared<const ClusterKey>(*ro));
  metad.meta.Script(InodeAttr{});
  EXPECT_TRUE(reader.GetAttr(1).ok());
  metad.meta.Script(InodeAttr{});
  Status mk = reader.Mkdir(1, "x", 0755, 0, 0).status();
  EXPECT_EQ(mk.code(), EROFS) << mk.ToString();
  EXPECT_EQ(metad.meta.last_call(), "GetAttr");
}

// ---- chunk grants (issue 35 hole 2) ----------------------------------------

// A grant source that hands out one fixed grant whatever is asked: a client
// that shows chunkd a grant of another file, an altered or a forged one.
class FixedGrants final : public ChunkGrantSource {
 public:
  explicit FixedGrants(EncodedGrant g) : g_(g) {}
  Result<EncodedGrant> Get(uint64_t, uint8_t) override { return g_; }
  void Invalidate(uint64_t) override {}

 private:
  EncodedGrant g_;
};

// metad over a real MetaStore with an identity table and grants, and a
// chunkd over an in-memory store that requires grants of client
// identities, as `stripefs metad` / `stripefs chunkd` run them; both on
// one injected clock (ms since the epoch) so expiry is tested without
// waiting. Files: /a/mine and /b/secret, both with chunk 0/0 version 1.
struct GrantCluster {
  GrantCluster(std::shared_ptr<const ClusterKey> k, Loop loop) : key(k) {
    const std::string tag = std::to_string(getpid()) + "-" +
                            std::to_string(counter++) + "-" +
                            std::to_string(static_cast<int>(loop));
    dir = ::testing::TempDir() + "/grants-" + tag;
    ids = ::testing::TempDir() + "/grants-ids-" + tag;
    std::filesystem::remove_all(dir);
    ::unlink(ids.c_str());
    auto st = MetaStore::Create(dir, Geometry{4, 2, 4096});
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    store = std::move(st).value();
    auto a = store->Mkdir(kRootInode, "a", 0755, 0, 0);
    auto b = store->Mkdir(kRootInode, "b", 0755, 0, 0);
    EXPECT_TRUE(a.ok() && b.ok());
    auto m = store->MkNode(a->ino, "mine", S_IFREG | 0644, 0, 0, 0);
    auto s = store->MkNode(b->ino, "secret", S_IFREG | 0644, 0, 0, 0);
    EXPECT_TRUE(m.ok() && s.ok());
    dir_a = a->ino;
    mine = m->ino;
    secret = s->ino;
    auto t = IdentityTable::Open(ids);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    table = std::move(t).value();
    volume.fill(0x35);
    auto gk = GrantKey::Derive(*key, volume);
    EXPECT_TRUE(gk.ok()) << gk.status().ToString();
    auto clock = [this] { return now_ms.load(); };
    meta_handler = std::make_unique<MetaServiceServer>(store.get());
    meta_handler->ServeIdentities(table.get(), key);
    meta_handler->ServeGrants(*gk, clock);
    meta_handler->OnIdentityRemoved(
        [this](const std::string& entity, const EntitySalt& salt) {
          RemoteChunkService as_server(chunkd->address(), key);
          EXPECT_TRUE(as_server.RevokeGrants(entity, salt).ok());
        });
    chunk_handler = std::make_unique<ChunkServiceServer>(&chunks);
    chunk_handler->RequireGrants(*gk, clock);
    chunk_handler->OnGrantsRevoked(
        [this](const std::string& entity) { chunkd->CloseSessionsOf(entity); });
    RpcServerOptions mo;
    mo.log_name = "grants-metad";
    mo.use_io_uring = loop == Loop::kUring;
    mo.gate = table.get();
    mo.binding = {ServerRole::kMetad, 0, volume};
    auto ms = RpcServer::Start(mo, key, meta_handler.get());
    EXPECT_TRUE(ms.ok()) << ms.status().ToString();
    metad = std::move(ms).value();
    RpcServerOptions co;
    co.log_name = "grants-chunkd";
    co.use_io_uring = loop == Loop::kUring;
    co.binding = {ServerRole::kChunkd, 1, volume};
    auto cs = RpcServer::Start(co, key, chunk_handler.get());
    EXPECT_TRUE(cs.ok()) << cs.status().ToString();
    chunkd = std::move(cs).value();
    EXPECT_TRUE(chunks.WriteChunk(Chunk(mine), 1, Bytes(0x11)).ok());
    EXPECT_TRUE(chunks.WriteChunk(Chunk(secret), 1, Bytes(0x22)).ok());
  }
  ~GrantCluster() {
    chunkd->Stop();
    metad->Stop();
    store.reset();
    std::filesystem::remove_all(dir);
    ::unlink(ids.c_str());
  }
  static ChunkId Chunk(uint64_t ino) { return {ino, 0, 0}; }
  static std::vector<uint8_t> Bytes(uint8_t fill) {
    return std::vector<uint8_t>(4096, fill);
  }
  // An identity added on metad, its key.
  std::shared_ptr<const ClusterKey> Add(const std::string& entity,
                                        const std::string& path,
                                        bool read_only) {
    RemoteMetaService as_server(metad->address(), key);
    auto k = as_server.AuthAdd({entity, path, read_only});
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    return std::make_shared<const ClusterKey>(*k);
  }
  // What chunk (ino, 0, 0) version `v` holds, or the read error.
  Result<std::vector<uint8_t>> Stored(uint64_t ino, uint64_t v) {
    return chunks.ReadChunk(Chunk(ino), v, 0, 4096);
  }
  uint64_t refused() const { return chunk_handler->grant_counters().refused; }

  static inline int counter = 0;
  std::shared_ptr<const ClusterKey> key;
  std::string dir, ids;
  std::unique_ptr<MetaStore> store;
  uint64_t dir_a = 0, mine = 0, secret = 0;
  std::unique_ptr<IdentityTable> table;
  VolumeId volume{};
  std::atomic<uint64_t> now_ms{1'800'000'000'000};
  MemoryChunkService chunks;
  std::unique_ptr<MetaServiceServer> meta_handler;
  std::unique_ptr<ChunkServiceServer> chunk_handler;
  std::unique_ptr<RpcServer> metad;
  std::unique_ptr<RpcServer> chunkd;
};

bool SkipWithoutIoUring(Loop loop) {
  return loop == Loop::kUring && !testing::IoUringRefusedReason().empty();
}

// A client of /a cannot overwrite or drop the chunks of /b/secret: metad
// will not grant them, chunkd refuses a request without a grant, and one
// that shows the grant of its own file for secret's chunk, whatever the
// op (write, patch, clone, drop a version, a batch, a batch read). Nothing
// changes on chunkd and every refusal is counted. Its own file works.
TEST_P(SecurityTest, ClientCannotWriteOrDropChunksOfAFileItWasNotGranted) {
  if (SkipWithoutIoUring(GetParam())) GTEST_SKIP() << "io_uring refused";
  GrantCluster c(key_, GetParam());
  auto alice = c.Add("client.alice", "/a", false);
  RemoteMetaService meta(c.metad->address(), alice);
  ASSERT_TRUE(meta.Lookup(c.dir_a, "mine").ok());  // reached through /a
  ChunkGrantCache cache(
      [&](uint64_t ino, uint8_t ops) { return meta.GrantChunks(ino, ops); });
  RpcClientOptions o = RemoteChunkService::DefaultOptions();
  o.expected_server = {ServerRole::kChunkd, 1, c.volume};
  RemoteChunkService granted(c.chunkd->address(), alice, o, {}, &cache);

  // Its own file: a granted write, patch, clone, read and version drop work.
  const auto data = GrantCluster::Bytes(0x33);
  ASSERT_TRUE(granted.WriteChunk(c.Chunk(c.mine), 2, data).ok());
  EXPECT_TRUE(granted
                  .PatchChunk(c.Chunk(c.mine), 2, 3, 4096, 0,
                              std::vector<uint8_t>(16, 0x44))
                  .ok());
  EXPECT_TRUE(granted.CloneChunk(c.Chunk(c.mine), 2, 4, 4096).ok());
  auto back = granted.ReadChunk(c.Chunk(c.mine), 2, 0, 4096);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, data);
  EXPECT_TRUE(granted.DeleteChunkVersion(c.Chunk(c.mine), 4).ok());
  EXPECT_EQ(c.refused(), 0u);

  // metad grants nothing outside /a.
  Status outside = meta.GrantChunks(c.secret, kGrantAllOps).status();
  EXPECT_EQ(outside.code(), EACCES) << outside.ToString();
  Status through = granted.WriteChunk(c.Chunk(c.secret), 1, data);
  EXPECT_EQ(through.code(), EACCES) << through.ToString();

  // No grant at all: refused before anything runs.
  RemoteChunkService bare(c.chunkd->address(), alice, o);
  uint64_t before = c.refused();
  Status st = bare.WriteChunk(c.Chunk(c.secret), 1, data);
  EXPECT_EQ(st.code(), EACCES) << st.ToString();
  EXPECT_NE(st.message().find("carries no chunk grant"), std::string::npos);
  EXPECT_EQ(bare.DeleteChunkVersion(c.Chunk(c.secret), 1).code(), EACCES);
  EXPECT_EQ(c.refused(), before + 2);

  // The grant of its own file shown for secret's chunk.
  auto own = meta.GrantChunks(c.mine, kGrantAllOps);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  FixedGrants wrong(own->first);
  RemoteChunkService liar(c.chunkd->address(), alice, o, {}, &wrong);
  before = c.refused();
  auto refused = [](const Status& s) {
    return s.code() == EACCES &&
                   s.message().find("is not covered") != std::string::npos
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << s.ToString();
  };
  const ChunkId target = c.Chunk(c.secret);
  EXPECT_TRUE(refused(liar.WriteChunk(target, 1, data)));
  EXPECT_TRUE(refused(liar.WriteChunk(target, 9, data)));
  EXPECT_TRUE(refused(liar.PatchChunk(target, 1, 9, 4096, 0, data)));
  EXPECT_TRUE(refused(liar.CloneChunk(target, 1, 9, 4096)));
  EXPECT_TRUE(refused(liar.DeleteChunkVersion(target, 1)));
  const ChunkVersion both[] = {{c.Chunk(c.mine), 2}, {target, 1}};
  EXPECT_TRUE(refused(liar.DeleteChunkVersions(both)));
  ChunkWriteOp ops[2];
  ops[0].id = c.Chunk(c.mine);
  ops[0].to_version = 10;
  ops[0].bytes = data;
  ops[1].id = target;
  ops[1].to_version = 10;
  ops[1].bytes = data;
  for (const Status& s : liar.ApplyChunkOps(ops)) EXPECT_TRUE(refused(s));
  std::vector<uint8_t> out(4096);
  EXPECT_TRUE(refused(liar.ReadChunkInto(target, 1, 0, out)));
  EXPECT_EQ(c.refused(), before + 8);

  // Nothing of secret changed, and the batch's own-file op did not run
  // either (a request is refused whole).
  auto kept = c.Stored(c.secret, 1);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, GrantCluster::Bytes(0x22));
  EXPECT_FALSE(c.Stored(c.secret, 9).ok());
  EXPECT_FALSE(c.Stored(c.mine, 10).ok());
  EXPECT_TRUE(c.Stored(c.mine, 2).ok());
}

// A grant chunkd's clock sees as expired is refused (EKEYEXPIRED), and
// the stub asks metad for a fresh one and succeeds, with no waiting.
TEST_P(SecurityTest, ExpiredChunkGrantIsRefusedAndTheClientRefreshesIt) {
  if (SkipWithoutIoUring(GetParam())) GTEST_SKIP() << "io_uring refused";
  GrantCluster c(key_, GetParam());
  auto bob = c.Add("client.bob", "/", false);
  RemoteMetaService meta(c.metad->address(), bob);
  RpcClientOptions o = RemoteChunkService::DefaultOptions();
  auto old = meta.GrantChunks(c.mine, kGrantAllOps);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->second, kGrantLifetimeMs);
  FixedGrants fixed(old->first);
  RemoteChunkService stuck(c.chunkd->address(), bob, o, {}, &fixed);
  const auto data = GrantCluster::Bytes(0x55);
  ASSERT_TRUE(stuck.WriteChunk(c.Chunk(c.mine), 2, data).ok());
  // Within the clock slack past expiry: still taken.
  c.now_ms += kGrantLifetimeMs + kGrantClockSlackMs;
  EXPECT_TRUE(stuck.WriteChunk(c.Chunk(c.mine), 3, data).ok());
  c.now_ms += 1;
  const uint64_t before = c.refused();
  Status st = stuck.WriteChunk(c.Chunk(c.mine), 4, data);
  EXPECT_EQ(st.code(), EKEYEXPIRED) << st.ToString();
  // The stub asked its source again and resent once: the same grant.
  EXPECT_EQ(c.refused(), before + 2);
  EXPECT_FALSE(c.Stored(c.mine, 4).ok());

  // The cache holds a grant the clocks have since left behind; chunkd
  // refuses it once, the stub fetches a fresh one and the write goes on.
  ChunkGrantCache cache(
      [&](uint64_t ino, uint8_t ops) { return meta.GrantChunks(ino, ops); });
  RemoteChunkService client(c.chunkd->address(), bob, o, {}, &cache);
  ASSERT_TRUE(client.WriteChunk(c.Chunk(c.mine), 5, data).ok());
  EXPECT_EQ(cache.fetches(), 1u);
  c.now_ms += 10 * kGrantLifetimeMs;
  Status again = client.WriteChunk(c.Chunk(c.mine), 6, data);
  EXPECT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(cache.fetches(), 2u);
  EXPECT_EQ(c.refused(), before + 3);
  EXPECT_TRUE(c.Stored(c.mine, 6).ok());
}

// A grant that does not verify is refused (EKEYREJECTED) and changes
// nothing: one altered to cover another file or op or to live longer, a
// bit of its MAC flipped, one shown on another identity's session, one of
// another volume, and one forged under a key other than the grant key.
TEST_P(SecurityTest, ForgedOrAlteredChunkGrantIsRefused) {
  if (SkipWithoutIoUring(GetParam())) GTEST_SKIP() << "io_uring refused";
  GrantCluster c(key_, GetParam());
  auto alice = c.Add("client.alice", "/", false);
  auto eve = c.Add("client.eve", "/", false);
  RemoteMetaService meta(c.metad->address(), alice);
  auto got = meta.GrantChunks(c.mine, kGrantRead);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ChunkGrant g;
  ASSERT_TRUE(DecodeGrant(got->first, &g));
  RpcClientOptions o = RemoteChunkService::DefaultOptions();
  const auto data = GrantCluster::Bytes(0x66);
  auto rejected = [&](const std::shared_ptr<const ClusterKey>& who,
                      const EncodedGrant& bytes, const ChunkId& id) {
    FixedGrants src(bytes);
    RemoteChunkService stub(c.chunkd->address(), who, o, {}, &src);
    Status st = stub.WriteChunk(id, 7, data);
    return st.code() == EKEYREJECTED
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << st.ToString();
  };
  const uint64_t before = c.refused();
  ChunkGrant other = g;  // secret's chunks instead
  other.inode = c.secret;
  EXPECT_TRUE(rejected(alice, EncodeGrant(other), c.Chunk(c.secret)));
  ChunkGrant writer = g;  // read and write instead of read
  writer.ops = kGrantAllOps;
  EXPECT_TRUE(rejected(alice, EncodeGrant(writer), c.Chunk(c.mine)));
  ChunkGrant longer = g;
  longer.expires_ms += 1;
  longer.ops = kGrantAllOps;
  EXPECT_TRUE(rejected(alice, EncodeGrant(longer), c.Chunk(c.mine)));
  EncodedGrant flipped = got->first;
  flipped[kChunkGrantBodySize + 5] ^= 0x01;
  EXPECT_TRUE(rejected(alice, flipped, c.Chunk(c.mine)));
  // alice's own, correct grant of read + write, on eve's session.
  auto rw = meta.GrantChunks(c.mine, kGrantAllOps);
  ASSERT_TRUE(rw.ok());
  EXPECT_TRUE(rejected(eve, rw->first, c.Chunk(c.mine)));
  // Signed for alice under another volume's or another cluster's grant key.
  VolumeId elsewhere = c.volume;
  elsewhere[0] ^= 1;
  for (auto gk : {GrantKey::Derive(*key_, elsewhere),
                  GrantKey::Derive(*TestKey(12), c.volume)}) {
    ASSERT_TRUE(gk.ok());
    ChunkGrant forged = g;
    forged.ops = kGrantAllOps;
    Caller as_alice{Principal::kClient, "client.alice", alice->salt()};
    gk->Sign(&forged, as_alice);
    EXPECT_TRUE(rejected(alice, EncodeGrant(forged), c.Chunk(c.mine)));
  }
  EXPECT_EQ(c.refused(), before + 7);
  EXPECT_FALSE(c.Stored(c.mine, 7).ok());
  EXPECT_FALSE(c.Stored(c.secret, 7).ok());
  EXPECT_EQ(*c.Stored(c.secret, 1), GrantCluster::Bytes(0x22));
}

// A read-only client gets read grants only: metad refuses it a write
// grant (EROFS), its reads work, and its read grant does not cover a
// write (EACCES).
TEST_P(SecurityTest, ReadOnlyClientGetsReadGrantsOnly) {
  if (SkipWithoutIoUring(GetParam())) GTEST_SKIP() << "io_uring refused";
  GrantCluster c(key_, GetParam());
  auto reader = c.Add("client.reader", "/", true);
  RemoteMetaService meta(c.metad->address(), reader);
  Status w = meta.GrantChunks(c.mine, kGrantWrite).status();
  EXPECT_EQ(w.code(), EROFS) << w.ToString();
  EXPECT_EQ(meta.GrantChunks(c.mine, kGrantAllOps).status().code(), EROFS);
  ChunkGrantCache cache(
      [&](uint64_t ino, uint8_t ops) { return meta.GrantChunks(ino, ops); });
  RpcClientOptions o = RemoteChunkService::DefaultOptions();
  RemoteChunkService client(c.chunkd->address(), reader, o, {}, &cache);
  auto read = client.ReadChunk(c.Chunk(c.mine), 1, 0, 4096);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, GrantCluster::Bytes(0x11));
  const auto data = GrantCluster::Bytes(0x77);
  Status st = client.WriteChunk(c.Chunk(c.mine), 8, data);
  EXPECT_EQ(st.code(), EROFS) << st.ToString();
  auto rg = meta.GrantChunks(c.mine, kGrantRead);
  ASSERT_TRUE(rg.ok());
  FixedGrants only_read(rg->first);
  RemoteChunkService liar(c.chunkd->address(), reader, o, {}, &only_read);
  const uint64_t before = c.refused();
  EXPECT_EQ(liar.WriteChunk(c.Chunk(c.mine), 8, data).code(), EACCES);
  EXPECT_EQ(liar.DeleteChunkVersion(c.Chunk(c.mine), 1).code(), EACCES);
  EXPECT_EQ(c.refused(), before + 2);
  EXPECT_FALSE(c.Stored(c.mine, 8).ok());
  EXPECT_TRUE(c.Stored(c.mine, 1).ok());
}

// `auth rm` reaches chunkd: it closes the removed client's chunkd
// sessions and refuses its grants from then on (EKEYREVOKED), though they
// have not expired, while another client goes on.
TEST_P(SecurityTest, RemovedClientsChunkGrantsAreVoidAndSessionsClosed) {
  if (SkipWithoutIoUring(GetParam())) GTEST_SKIP() << "io_uring refused";
  GrantCluster c(key_, GetParam());
  auto carol = c.Add("client.carol", "/", false);
  auto dave = c.Add("client.dave", "/", false);
  RemoteMetaService meta(c.metad->address(), carol);
  auto g = meta.GrantChunks(c.mine, kGrantAllOps);
  ASSERT_TRUE(g.ok());
  FixedGrants kept(g->first);
  RpcClientOptions o = RemoteChunkService::DefaultOptions();
  RemoteChunkService client(c.chunkd->address(), carol, o, {}, &kept);
  const auto data = GrantCluster::Bytes(0x7a);
  ASSERT_TRUE(client.WriteChunk(c.Chunk(c.mine), 2, data).ok());
  auto open_conn = OpenRawSession(c.chunkd->address(), *carol);
  ASSERT_TRUE(open_conn.ok()) << open_conn.status().ToString();

  RemoteMetaService as_server(c.metad->address(), key_);
  ASSERT_TRUE(as_server.AuthRemove("client.carol").ok());
  EXPECT_TRUE(ClosedByPeer(open_conn->get()))
      << "chunkd kept the removed identity's session open";
  Status st = client.WriteChunk(c.Chunk(c.mine), 3, data);
  EXPECT_EQ(st.code(), EKEYREVOKED) << st.ToString();
  EXPECT_FALSE(c.Stored(c.mine, 3).ok());
  ChunkGrantCache cache([&](uint64_t ino, uint8_t ops) {
    return RemoteMetaService(c.metad->address(), dave).GrantChunks(ino, ops);
  });
  RemoteChunkService other(c.chunkd->address(), dave, o, {}, &cache);
  EXPECT_TRUE(other.WriteChunk(c.Chunk(c.mine), 4, data).ok());
}

TEST_P(SecurityTest, FrameReplayedWithinItsConnectionIsRefused) {
  Start();
  if (IsSkipped()) return;
  RemoteChunkService direct(server_->address(), key_);
  const ChunkId a{8, 0, 2};
  ASSERT_TRUE(direct.WriteChunk(a, 1, data_).ok());
  auto c = OpenRawSession(server_->address(), *key_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kDeleteChunk);
  h.request_id = 1;
  auto wire = EncodeFrame(c->s.send, h, DeleteRequest(a, 2), {});
  SendAllBytes(c->get(), wire);
  auto ok = ReadFrame(c->get(), c->s.recv, Soon());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_FALSE(Present(a, 1));
  ASSERT_TRUE(direct.WriteChunk(a, 1, data_).ok());
  // The same bytes again on the same connection.
  SendAllBytes(c->get(), wire);
  auto again = ReadFrame(c->get(), c->s.recv, Soon());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), EACCES);
  EXPECT_TRUE(ClosedByPeer(c->get()));
  EXPECT_TRUE(Present(a, 1)) << "the replayed DeleteChunk was executed";
  EXPECT_EQ(server_->counters().rejected_bad_mac, 1u);
}

TEST_P(SecurityTest, ReorderedFramesAreRefusedAndNeitherRuns) {
  Start();
  if (IsSkipped()) return;
  RemoteChunkService direct(server_->address(), key_);
  const ChunkId b{9, 0, 0}, c2{9, 0, 1};
  ASSERT_TRUE(direct.WriteChunk(b, 1, data_).ok());
  ASSERT_TRUE(direct.WriteChunk(c2, 1, data_).ok());
  auto c = OpenRawSession(server_->address(), *key_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kDeleteChunk);
  h.request_id = 1;
  auto first = EncodeFrame(c->s.send, h, DeleteRequest(b, 2), {});
  h.request_id = 2;
  auto second = EncodeFrame(c->s.send, h, DeleteRequest(c2, 2), {});
  SendAllBytes(c->get(), second);
  SendAllBytes(c->get(), first);
  auto r = ReadFrame(c->get(), c->s.recv, Soon());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EACCES);
  EXPECT_TRUE(ClosedByPeer(c->get()));
  EXPECT_TRUE(Present(b, 1));
  EXPECT_TRUE(Present(c2, 1));
  EXPECT_EQ(server_->counters().requests, 2u);  // the two direct writes
}

// Soft RLIMIT_NOFILE up to `want` (client and server ends of every
// connection live in this process); false when the hard limit is lower.
bool RaiseFdLimit(rlim_t want) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  if (rl.rlim_cur >= want) return true;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) return false;
  rl.rlim_cur = want;
  return ::setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

constexpr int kHostile = 2000;

std::vector<UniqueFd> OpenIdle(const std::string& addr, int n) {
  std::vector<UniqueFd> fds;
  for (int i = 0; i < n; ++i) {
    auto fd = ConnectTcp(addr, Soon());
    EXPECT_TRUE(fd.ok()) << i << ": " << fd.status().ToString();
    if (!fd.ok()) break;
    fds.push_back(std::move(fd).value());
  }
  return fds;
}

TEST_P(SecurityTest,
       LegitClientIsServedWhileTwoThousandIdleConnectionsAreOpen) {
  if (!RaiseFdLimit(2 * kHostile + 512))
    GTEST_SKIP() << "RLIMIT_NOFILE hard limit below " << 2 * kHostile + 512
                 << ": cannot open the flood here (raise ulimit -Hn)";
  RpcServerOptions o;
  o.log_rejects = false;
  Start(o);  // default limits and timeouts
  if (IsSkipped()) return;
  // From the same IP as the legitimate client: the hardest case.
  std::vector<UniqueFd> idle = OpenIdle(server_->address(), kHostile);
  ASSERT_EQ(idle.size(), size_t{kHostile});
  EXPECT_TRUE(Eventually(
      [&] { return server_->counters().connections >= uint64_t{kHostile}; }));
  RpcServerOptions defaults;
  EXPECT_EQ(server_->counters().pending_connections,
            defaults.max_pending_per_ip);  // the server holds its share
  RemoteChunkService legit(server_->address(), key_);
  ASSERT_TRUE(legit.WriteChunk({1, 2, 3}, 1, data_).ok());
  auto st = legit.Stats();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->chunks, 1u);
  EXPECT_GE(server_->counters().refused_connections,
            uint64_t{kHostile} - defaults.max_pending_per_ip);
}

TEST_P(SecurityTest, IdleConnectionsAreClosedAfterTheTimeouts) {
  if (!RaiseFdLimit(2 * kHostile + 512))
    GTEST_SKIP() << "RLIMIT_NOFILE hard limit below " << 2 * kHostile + 512
                 << ": cannot open the flood here (raise ulimit -Hn)";
  RpcServerOptions o;
  o.log_rejects = false;
  o.max_connections = o.max_connections_per_ip = 4 * kHostile;
  o.max_pending = o.max_pending_per_ip = 4 * kHostile;  // hold every one
  o.handshake_timeout = std::chrono::milliseconds(1500);
  o.idle_timeout = std::chrono::milliseconds(1500);
  Start(o);
  if (IsSkipped()) return;
  std::vector<UniqueFd> idle = OpenIdle(server_->address(), kHostile);
  ASSERT_EQ(idle.size(), size_t{kHostile});
  auto authed = OpenRawSession(server_->address(), *key_);  // idle after auth
  ASSERT_TRUE(authed.ok()) << authed.status().ToString();
  RemoteChunkService legit(server_->address(), key_);
  ASSERT_TRUE(legit.WriteChunk({1, 2, 3}, 1, data_).ok());
  // Every idle connection is closed by the server: the unauthenticated ones
  // after the handshake timeout, the authenticated one after the idle one.
  EXPECT_TRUE(Eventually([&] {
    return server_->counters().open_connections == 0;
  })) << server_->counters().open_connections
      << " still open";
  EXPECT_EQ(server_->counters().pending_connections, 0u);
  EXPECT_GE(server_->counters().timed_out_connections, uint64_t{kHostile} + 2);
  for (int i : {0, kHostile / 2, kHostile - 1})
    EXPECT_TRUE(ClosedByPeer(idle[i].get())) << i;
  EXPECT_TRUE(ClosedByPeer(authed->get()));
  // The pooled client connection was closed too; the client reconnects.
  auto st = legit.Stats();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->chunks, 1u);
}

TEST_P(SecurityTest, StartedFrameHeaderMustCompleteWithinTheHeaderTimeout) {
  RpcServerOptions o;
  o.header_timeout = std::chrono::milliseconds(300);
  Start(o);
  if (IsSkipped()) return;
  auto c = OpenRawSession(server_->address(), *key_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  uint8_t part[10] = {0x46, 0x53};  // the start of a header, never finished
  SendAllBytes(c->get(), part);
  EXPECT_TRUE(ClosedByPeer(c->get()));
  EXPECT_EQ(server_->counters().timed_out_connections, 1u);
}

// ---- secure mode (issue 35 hole 4) ----

// Chunk data easy to find in a capture: no 16-byte run repeats.
std::vector<uint8_t> SecretData(size_t n) {
  std::string s;
  for (int i = 0; s.size() < n; ++i) s += "secret-" + std::to_string(i) + ";";
  return std::vector<uint8_t>(s.begin(), s.begin() + n);
}

// How many of the 16-byte pieces of `data` (at each multiple of 16) appear
// anywhere in `capture` (every 8-byte window of the capture indexed once,
// each piece then looked up and compared in full).
size_t PiecesSeen(const std::vector<uint8_t>& capture,
                  const std::vector<uint8_t>& data) {
  auto load = [](const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  std::vector<std::pair<uint64_t, size_t>> index;
  for (size_t i = 0; i + 16 <= capture.size(); ++i)
    index.emplace_back(load(&capture[i]), i);
  std::sort(index.begin(), index.end());
  size_t seen = 0;
  for (size_t at = 0; at + 16 <= data.size(); at += 16) {
    auto range = std::equal_range(
        index.begin(), index.end(), std::make_pair(load(&data[at]), size_t{0}),
        [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto it = range.first; it != range.second; ++it) {
      if (std::memcmp(&capture[it->second], &data[at], 16) == 0) {
        ++seen;
        break;
      }
    }
  }
  return seen;
}

// A write stream and its read-back through a tap: with secure mode on the
// tap sees none of the written bytes in either direction; authenticated
// only (the mode before issue 35), it sees all of them.
TEST_P(SecurityTest, SecureModeHidesWrittenBytesFromTheWire) {
  for (bool secure : {false, true}) {
    SCOPED_TRACE(secure ? "secure" : "authenticated only");
    if (server_) server_->Stop();
    server_.reset();
    Start({}, secure);
    if (IsSkipped()) return;
    const auto data = SecretData(256 << 10);
    std::vector<uint8_t> up, down;
    {
      RecordingProxy tap(server_->address());
      RemoteChunkService via(tap.address(), key_->WithSecureWire(secure));
      for (uint32_t i = 0; i < 4; ++i) {
        const ChunkId id{9, i, 1};
        ASSERT_TRUE(via.WriteChunk(id, 1, data).ok());
        auto back = via.ReadChunk(id, 1, 0, static_cast<uint32_t>(data.size()));
        ASSERT_TRUE(back.ok()) << back.status().ToString();
        ASSERT_TRUE(std::equal(data.begin(), data.end(), back->begin()));
      }
      up = tap.captured();
      down = tap.captured_down();
    }
    ASSERT_GT(up.size(), 4 * data.size());
    ASSERT_GT(down.size(), 4 * data.size());
    const size_t pieces = data.size() / 16;
    EXPECT_EQ(PiecesSeen(up, data), secure ? 0 : pieces);
    EXPECT_EQ(PiecesSeen(down, data), secure ? 0 : pieces);
  }
}

// A server in secure mode refuses a client that is not, with a reason that
// names the fix, and runs none of its requests.
TEST_P(SecurityTest, SecureServerRefusesAnAuthenticatedOnlyClient) {
  Start({}, /*secure=*/true);
  if (IsSkipped()) return;
  RemoteChunkService plain(server_->address(), key_);
  Status s = plain.WriteChunk({9, 0, 2}, 1, data_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--secure"), std::string::npos) << s.ToString();
  EXPECT_FALSE(Present({9, 0, 2}, 1));
  EXPECT_EQ(server_->counters().requests, 0u);
  RemoteChunkService secure(server_->address(), key_->WithSecureWire(true));
  EXPECT_TRUE(secure.WriteChunk({9, 0, 2}, 1, data_).ok());
}

// A server not in secure mode answers a secure client securely (the reply
// carrying the chunk is encrypted too).
TEST_P(SecurityTest, AuthenticatedOnlyServerAnswersASecureClientSecurely) {
  Start();
  if (IsSkipped()) return;
  RemoteChunkService direct(server_->address(), key_);
  const auto data = SecretData(64 << 10);
  ASSERT_TRUE(direct.WriteChunk({9, 1, 1}, 1, data).ok());
  RecordingProxy tap(server_->address());
  RemoteChunkService via(tap.address(), key_->WithSecureWire(true));
  auto back = via.ReadChunk({9, 1, 1}, 1, 0, static_cast<uint32_t>(data.size()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(std::equal(data.begin(), data.end(), back->begin()));
  EXPECT_EQ(PiecesSeen(tap.captured_down(), data), 0u);
}

// Secure mode holds for a client identity too: the server derives
// client.alice's key from its own (secure) key, so its session with alice
// refuses her cleartext frames and runs her secure ones, encrypted with the
// session keys of the v4 handshake (the tap sees none of her bytes).
TEST_P(SecurityTest, SecureServerRequiresEncryptionOfAClientIdentity) {
  Start({}, /*secure=*/true);
  if (IsSkipped()) return;
  auto alice = key_->NewIdentity("client.alice");
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  auto alice_key = std::make_shared<const ClusterKey>(*alice);
  RemoteChunkService plain(server_->address(), alice_key);
  Status s = plain.WriteChunk({9, 2, 1}, 1, data_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--secure"), std::string::npos) << s.ToString();
  EXPECT_FALSE(Present({9, 2, 1}, 1));
  const auto data = SecretData(64 << 10);
  RecordingProxy tap(server_->address());
  RemoteChunkService secure(tap.address(), alice_key->WithSecureWire(true));
  ASSERT_TRUE(secure.WriteChunk({9, 2, 1}, 1, data).ok());
  auto back =
      secure.ReadChunk({9, 2, 1}, 1, 0, static_cast<uint32_t>(data.size()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(std::equal(data.begin(), data.end(), back->begin()));
  EXPECT_EQ(PiecesSeen(tap.captured(), data), 0u);
  EXPECT_EQ(PiecesSeen(tap.captured_down(), data), 0u);
}

// ---- bounded logging of rejects (issue 35 item 6) ----

// A junk loop (2,000 connections, each sending bytes that are no
// handshake) is counted in full but logs a bounded number of lines: 20 at
// once, then one a second of the flood (before, one line per reject).
TEST_P(SecurityTest, RejectFloodLogsABoundedNumberOfLines) {
  Start();
  if (IsSkipped()) return;
  constexpr int kJunk = 2000;
  const auto before = server_->counters();
  const auto t0 = std::chrono::steady_clock::now();
  ::testing::internal::CaptureStderr();
  std::vector<uint8_t> junk(kClientHelloSize, 0x6a);
  for (int i = 0; i < kJunk; ++i) {
    auto fd = ConnectTcp(server_->address(), Soon());
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    SendAllBytes(fd->get(), junk);
    ReadUntilClosed(fd->get());
  }
  const bool all_counted = Eventually([&] {
    return server_->counters().rejected_total() >=
           before.rejected_total() + kJunk;
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - t0)
                           .count();
  EXPECT_TRUE(all_counted);
  size_t lines = 0;
  for (size_t at = log.find("security-test: "); at != std::string::npos;
       at = log.find("security-test: ", at + 1))
    ++lines;
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 20u + static_cast<size_t>(seconds) + 1) << log.substr(0, 2000);
}

TEST(LogLimiterTest, BurstThenOneLinePerIntervalReportingTheDropped) {
  using C = LogLimiter::Clock;
  LogLimiter l(3, std::chrono::seconds(1));
  const C::time_point t{std::chrono::hours(1)};
  uint64_t dropped = 99;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(l.Allow(t, &dropped));
    EXPECT_EQ(dropped, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(l.Allow(t, &dropped));
  EXPECT_FALSE(l.Allow(t + std::chrono::milliseconds(999), &dropped));
  EXPECT_TRUE(l.Allow(t + std::chrono::seconds(1), &dropped));
  EXPECT_EQ(dropped, 1001u);
  EXPECT_FALSE(l.Allow(t + std::chrono::seconds(1), &dropped));
  // A long quiet spell refills the burst, never more.
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(l.Allow(t + std::chrono::hours(1), &dropped));
  EXPECT_FALSE(l.Allow(t + std::chrono::hours(1), &dropped));
}

INSTANTIATE_TEST_SUITE_P(Loops, SecurityTest,
                         ::testing::Values(Loop::kUring, Loop::kPoll),
                         [](const auto& p) {
                           return p.param == Loop::kUring ? "uring" : "poll";
                         });

}  // namespace
}  // namespace stripefs::rpc

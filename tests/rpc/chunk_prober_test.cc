// ChunkProber (metad's health probe) and RPC call deadlines against real
// RPC servers on 127.0.0.1: a live chunkd answers, a stopped server refuses,
// a listener that never answers (a SIGSTOPped process) times out, and a
// timed-out call never leaves its connection for the next call.
#include "backend/rpc/chunk_prober.h"

#include <gtest/gtest.h>

#include <array>
#include <filesystem>

#include "backend/chunk/chunk_store.h"
#include "backend/rpc/chunk_service_server.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/tcp_socket.h"
#include "tests/support/hanging_chunk_service.h"

namespace stripefs {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

using testing::HangingChunkService;

class MetadRole : public rpc::RpcHandler {
 public:
  std::string Role() const override { return "metad"; }
  void Handle(const rpc::Caller&, uint16_t, std::span<const uint8_t>,
              AlignedBytes&, rpc::RpcReply*) override {}
};

class ChunkProberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs-prober-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::array<uint8_t, rpc::kClusterKeySize> kb;
    kb.fill(0x5a);
    key_ = rpc::ClusterKey::FromBytes(kb);
    ChunkStoreOptions co;
    co.reserve_bytes = 0;
    auto store = ChunkStore::Open(dir_ + "/store", co);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    slow_ = std::make_unique<HangingChunkService>(store_.get());
    handler_ = std::make_unique<rpc::ChunkServiceServer>(slow_.get());
    rpc::RpcServerOptions so;
    so.log_name = "test-chunkd";
    so.binding = {rpc::ServerRole::kChunkd, 1};  // Info()'s id
    auto server = rpc::RpcServer::Start(so, key_, handler_.get());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  void TearDown() override {
    if (slow_) slow_->Release();
    if (server_) server_->Stop();
    server_.reset();
    handler_.reset();
    slow_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  ServerInfo Info(const std::string& address) {
    ServerInfo info;
    info.id = 1;
    info.address = address;
    return info;
  }

  std::string dir_;
  std::shared_ptr<const rpc::ClusterKey> key_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<HangingChunkService> slow_;
  std::unique_ptr<rpc::ChunkServiceServer> handler_;
  std::unique_ptr<rpc::RpcServer> server_;
};

TEST_F(ChunkProberTest, LiveChunkdAnswersStoppedOneIsUnreachable) {
  ChunkProber prober(key_);
  const std::string address = server_->address();
  for (int i = 0; i < 3; ++i) {
    Status s = prober.Probe(Info(address), milliseconds(2000));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  server_->Stop();
  server_.reset();
  Status s = prober.Probe(Info(address), milliseconds(2000));
  EXPECT_EQ(s.code(), EHOSTDOWN) << s.ToString();
}

TEST_F(ChunkProberTest, ASilentListenerTimesOut) {
  // Accepts connections (the kernel completes them) but never reads: what
  // a SIGSTOPped chunkd looks like.
  std::string bound;
  auto silent = rpc::ListenTcp("127.0.0.1:0", &bound);
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  ChunkProber prober(key_);
  for (int i = 0; i < 2; ++i) {
    Status s = prober.Probe(Info(bound), milliseconds(100));
    EXPECT_EQ(s.code(), ETIMEDOUT) << s.ToString();
  }
}

TEST_F(ChunkProberTest, AServerThatIsNotAChunkdIsAMiss) {
  MetadRole metad;
  rpc::RpcServerOptions so;
  so.log_name = "test-metad";
  auto server = rpc::RpcServer::Start(so, key_, &metad);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ChunkProber prober(key_);
  // The handshake already says it is metad, not the chunkd the map names.
  Status s = prober.Probe(Info((*server)->address()), milliseconds(2000));
  EXPECT_EQ(s.code(), EACCES) << s.ToString();
  EXPECT_NE(s.message().find("reached metad, expected chunkd 1"),
            std::string::npos)
      << s.ToString();
  (*server)->Stop();
}

TEST_F(ChunkProberTest, ATimedOutReadNeverPoisonsTheNextCall) {
  const ChunkId a{1, 0, 0}, b{1, 0, 1};
  const std::vector<uint8_t> da(1000, 0xaa), db(1000, 0xbb);
  ASSERT_TRUE(store_->WriteChunk(a, 1, da).ok());
  ASSERT_TRUE(store_->WriteChunk(b, 1, db).ok());
  // Reads time out after 100 ms; the server answers the first one late.
  rpc::RemoteChunkService remote(server_->address(), key_,
                                 rpc::RemoteChunkService::DefaultOptions(),
                                 milliseconds(100));
  ASSERT_TRUE(remote.Ping().ok());  // a pooled connection exists now
  slow_->HangNextRead();
  auto r = remote.ReadChunk(a, 1, 0, 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ETIMEDOUT) << r.status().ToString();
  // The late answer to the read of `a` is sent now, on the abandoned
  // connection; the next calls must get their own answers.
  slow_->Release();
  for (int i = 0; i < 3; ++i) {
    auto rb = remote.ReadChunk(b, 1, 0, 1000);
    ASSERT_TRUE(rb.ok()) << rb.status().ToString();
    EXPECT_EQ(*rb, db);
    auto ra = remote.ReadChunk(a, 1, 0, 1000);
    ASSERT_TRUE(ra.ok()) << ra.status().ToString();
    EXPECT_EQ(*ra, da);
  }
  // Other calls keep the long default timeout (writes are not cut short).
  EXPECT_EQ(remote.client().options().call_timeout, milliseconds(10000));
}

}  // namespace
}  // namespace stripefs

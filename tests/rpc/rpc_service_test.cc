// Integration tests: RpcServer + RpcClient on 127.0.0.1 serving in-memory
// fakes through MetaServiceServer / ChunkServiceServer, called through
// RemoteMetaService / RemoteChunkService.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "backend/rpc/chunk_service_server.h"
#include "backend/rpc/meta_service_server.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/remote_meta_service.h"
#include "backend/rpc/tcp_socket.h"
#include "backend/rpc/typed_call.h"
#include "backend/rpc/wire_messages.h"
#include "tests/rpc/fake_services.h"
#include "tests/rpc/raw_session.h"
#include "tests/rpc/sample_values.h"
#include "tests/rpc/test_sessions.h"
#include "tests/support/random_bytes.h"

namespace stripefs::rpc {
namespace {

using testing::MemoryChunkService;
using testing::Sampler;
using testing::ScriptedMetaService;
using testing::TestKey;
using testing::Wire;

RpcServerOptions Quiet(std::string listen = "127.0.0.1:0") {
  RpcServerOptions o;
  o.listen = std::move(listen);
  o.log_name = "test-server";
  return o;
}

class MetaRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = TestKey(7);
    handler_ = std::make_unique<MetaServiceServer>(&fake_);
    auto s = RpcServer::Start(Quiet(), key_, handler_.get());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    remote_ = std::make_unique<RemoteMetaService>(server_->address(), key_);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  ScriptedMetaService fake_;
  std::shared_ptr<const ClusterKey> key_;
  std::unique_ptr<MetaServiceServer> handler_;
  std::unique_ptr<RpcServer> server_;
  std::unique_ptr<RemoteMetaService> remote_;
  Sampler smp_;
};

TEST_F(MetaRpcTest, PingReportsRole) {
  auto r = remote_->Ping();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "metad");
}

// CreateEntry / UnlinkEntry (one call per create and unlink): arguments,
// both attribute sets and the refusal code cross unchanged; a service
// without them answers EOPNOTSUPP through the wire, as an older metad does.
TEST_F(MetaRpcTest, CreateEntryAndUnlinkEntryRoundTrip) {
  using std::make_tuple;
  MetaService& m = *remote_;
  EntryChange change{smp_.Make<InodeAttr>(), smp_.Make<InodeAttr>()};
  change.parent.ino = change.node.ino + 1;
  change.parent.mode = 042775;
  fake_.Script(change);
  CreateEntryRequest req{7,
                         "new",
                         0100640,
                         1000,
                         100,
                         0x0801,
                         kCreateInheritSetgid | kCreateUnlessDefaultAcl};
  auto c = m.CreateEntry(req);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->node, change.node);
  EXPECT_EQ(c->parent, change.parent);
  EXPECT_EQ(fake_.last_call(), "CreateEntry");
  EXPECT_EQ((fake_.last_args<uint64_t, std::string, uint32_t, uint32_t,
                             uint32_t, uint32_t, uint32_t>()),
            make_tuple(uint64_t{7}, std::string("new"), 0100640u, 1000u, 100u,
                       0x0801u, 3u));
  auto u = m.UnlinkEntry(8, "old");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->node, change.node);
  EXPECT_EQ(u->parent, change.parent);
  EXPECT_EQ((fake_.last_args<uint64_t, std::string>()),
            make_tuple(uint64_t{8}, std::string("old")));
  fake_.Fail(Status(kCreateNeedsAcl, "default ACL"));
  EXPECT_EQ(m.CreateEntry(req).status().code(), kCreateNeedsAcl);
  fake_.entry_calls_unsupported = true;
  EXPECT_EQ(m.CreateEntry(req).status().code(), EOPNOTSUPP);
  EXPECT_EQ(m.UnlinkEntry(8, "old").status().code(), EOPNOTSUPP);
  fake_.entry_calls_unsupported = false;
}

TEST_F(MetaRpcTest, EveryMethodRoundTripsArgumentsAndResults) {
  using std::make_tuple;
  MetaService& m = *remote_;
  {
    auto g = smp_.Make<Geometry>();
    fake_.Script(g);
    auto r = m.GetGeometry();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, g);
  }
  {
    auto cm = smp_.Make<ClusterMap>();
    fake_.Script(cm);
    auto r = m.GetClusterMap();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Wire(*r), Wire(cm));
    EXPECT_EQ(r->servers, cm.servers);
  }
  {
    auto info = smp_.Make<ServerInfo>();
    fake_.Script({});
    ASSERT_TRUE(m.UpsertServer(info).ok());
    EXPECT_EQ(fake_.last_call(), "UpsertServer");
    EXPECT_EQ(std::get<0>(fake_.last_args<ServerInfo>()), info);
    ASSERT_TRUE(m.SetServerState(17, ServerState::kOut).ok());
    EXPECT_EQ((fake_.last_args<uint32_t, ServerState>()),
              make_tuple(17u, ServerState::kOut));
  }
  auto attr = smp_.Make<InodeAttr>();
  fake_.Script(attr);
  {
    auto r = m.Lookup(5, "file.txt");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, attr);
    EXPECT_EQ((fake_.last_args<uint64_t, std::string>()),
              make_tuple(uint64_t{5}, std::string("file.txt")));
    r = m.GetAttr(99);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, attr);
    EXPECT_EQ(std::get<0>(fake_.last_args<uint64_t>()), 99u);
  }
  {
    auto req = smp_.Make<SetAttrRequest>();
    auto obs = smp_.Make<std::vector<ObsoleteStripe>>();
    fake_.Script(attr, obs);
    std::vector<ObsoleteStripe> got;
    auto r = m.SetAttr(12, req, &got);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, attr);
    EXPECT_EQ(Wire(got), Wire(obs));
    auto [ino, req2] = fake_.last_args<uint64_t, SetAttrRequest>();
    EXPECT_EQ(ino, 12u);
    EXPECT_EQ(Wire(req2), Wire(req));
    // A null out-pointer is allowed.
    EXPECT_TRUE(m.SetAttr(12, req, nullptr).ok());
  }
  fake_.Script(attr);
  {
    ASSERT_TRUE(m.MkNode(1, "dev", 020644, 10, 20, 0x0801).ok());
    EXPECT_EQ((fake_.last_args<uint64_t, std::string, uint32_t, uint32_t,
                               uint32_t, uint32_t>()),
              make_tuple(uint64_t{1}, std::string("dev"), 020644u, 10u, 20u,
                         0x0801u));
    ASSERT_TRUE(m.Mkdir(2, "d", 040755, 11, 21).ok());
    EXPECT_EQ(
        (fake_
             .last_args<uint64_t, std::string, uint32_t, uint32_t, uint32_t>()),
        make_tuple(uint64_t{2}, std::string("d"), 040755u, 11u, 21u));
    auto r = m.Symlink(3, "ln", "../target path", 12, 22);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, attr);
    EXPECT_EQ((fake_.last_args<uint64_t, std::string, std::string, uint32_t,
                               uint32_t>()),
              make_tuple(uint64_t{3}, std::string("ln"),
                         std::string("../target path"), 12u, 22u));
    ASSERT_TRUE(m.Link(4, 5, "hard").ok());
    EXPECT_EQ((fake_.last_args<uint64_t, uint64_t, std::string>()),
              make_tuple(uint64_t{4}, uint64_t{5}, std::string("hard")));
    r = m.Unlink(6, "gone");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, attr);
    EXPECT_EQ(fake_.last_call(), "Unlink");
  }
  {
    fake_.Script(std::string("/some/target"));
    auto r = m.ReadLink(77);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, "/some/target");
  }
  {
    fake_.Script({});
    ASSERT_TRUE(m.Rmdir(8, "dir").ok());
    EXPECT_EQ(fake_.last_call(), "Rmdir");
    fake_.Script({}, uint64_t{4242});
    uint64_t replaced = 0;
    ASSERT_TRUE(m.Rename(1, "a", 2, "b", 1, &replaced).ok());
    EXPECT_EQ(replaced, 4242u);
    EXPECT_EQ((fake_.last_args<uint64_t, std::string, uint64_t, std::string,
                               uint32_t>()),
              make_tuple(uint64_t{1}, std::string("a"), uint64_t{2},
                         std::string("b"), 1u));
  }
  {
    auto entries = smp_.Make<std::vector<DirEntry>>();
    fake_.Script(entries);
    auto r = m.ReadDir(1, 555, 128);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Wire(*r), Wire(entries));
    EXPECT_EQ(r->at(0).name, entries[0].name);
    EXPECT_EQ((fake_.last_args<uint64_t, uint64_t, uint32_t>()),
              make_tuple(uint64_t{1}, uint64_t{555}, 128u));
  }
  {
    auto obs = smp_.Make<std::vector<ObsoleteStripe>>();
    fake_.Script({}, obs);
    std::vector<ObsoleteStripe> got;
    ASSERT_TRUE(m.PurgeInode(31, &got).ok());
    EXPECT_EQ(Wire(got), Wire(obs));
    // PurgeInodes: the fake serves it with MetaService's default, one
    // PurgeInode per inode.
    fake_.Script({}, obs);
    std::vector<int32_t> codes;
    got.clear();
    ASSERT_TRUE(m.PurgeInodes({32}, &codes, &got).ok());
    EXPECT_EQ(codes, std::vector<int32_t>{0});
    EXPECT_EQ(Wire(got), Wire(obs));
    EXPECT_EQ((fake_.last_args<uint64_t>()), std::make_tuple(uint64_t{32}));
    // ListOrphanStripes: codes and stripes cross unchanged, appended.
    fake_.Script(std::vector<int32_t>{0, ENOENT, E2BIG}, obs);
    codes.clear();
    std::vector<ObsoleteStripe> listed = {{1, 2, 3}};
    ASSERT_TRUE(m.ListOrphanStripes({40, 41, 42}, &codes, &listed).ok());
    EXPECT_EQ(codes, (std::vector<int32_t>{0, ENOENT, E2BIG}));
    ASSERT_EQ(listed.size(), obs.size() + 1);
    EXPECT_EQ(listed[0].version, 3u);
    EXPECT_EQ(
        Wire(std::vector<ObsoleteStripe>(listed.begin() + 1, listed.end())),
        Wire(obs));
    EXPECT_EQ((fake_.last_args<std::vector<uint64_t>>()),
              std::make_tuple(std::vector<uint64_t>{40, 41, 42}));
    // A metad answering fewer codes than inodes is a protocol error.
    fake_.Script(std::vector<int32_t>{0}, obs);
    EXPECT_EQ(m.ListOrphanStripes({40, 41}, &codes, &listed).code(), EPROTO);
    EXPECT_TRUE(codes.empty());
    fake_.Script(std::vector<uint64_t>{3, 5, 8});
    auto orphans = m.ListOrphans();
    ASSERT_TRUE(orphans.ok());
    EXPECT_EQ(*orphans, (std::vector<uint64_t>{3, 5, 8}));
    auto st = smp_.Make<FsStats>();
    fake_.Script(st);
    auto fs = m.StatFs();
    ASSERT_TRUE(fs.ok());
    EXPECT_EQ(fs->inodes, st.inodes);
    EXPECT_EQ(fs->bytes_used, st.bytes_used);
  }
  {
    fake_.Script({});
    std::string bin("v\0\xff", 3);
    ASSERT_TRUE(m.SetXattr(9, "user.k", bin, 2).ok());
    EXPECT_EQ((fake_.last_args<uint64_t, std::string, std::string, uint32_t>()),
              make_tuple(uint64_t{9}, std::string("user.k"), bin, 2u));
    fake_.Script(bin);
    auto v = m.GetXattr(9, "user.k");
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, bin);
    fake_.Script(std::vector<std::string>{"user.a", "user.b"});
    auto l = m.ListXattr(9);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(*l, (std::vector<std::string>{"user.a", "user.b"}));
    fake_.Script({});
    ASSERT_TRUE(m.RemoveXattr(9, "user.a").ok());
    EXPECT_EQ(fake_.last_call(), "RemoveXattr");
  }
  {
    fake_.Script(uint64_t{1000});
    auto v = m.AllocateVersions(6);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, 1000u);
    EXPECT_EQ(std::get<0>(fake_.last_args<uint32_t>()), 6u);
    auto svs = smp_.Make<std::vector<StripeVersion>>();
    fake_.Script(svs);
    auto g = m.GetStripes(4, 10, 20);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(*g, svs);
    auto sv = smp_.Make<StripeVersion>();
    ObsoleteStripe obs{4, 10, 999};
    fake_.Script({}, obs);
    ObsoleteStripe got;
    ASSERT_TRUE(m.CommitStripe(4, sv, 998, 1 << 20, &got).ok());
    EXPECT_EQ(Wire(got), Wire(obs));
    EXPECT_EQ((fake_.last_args<uint64_t, StripeVersion, uint64_t, uint64_t>()),
              make_tuple(uint64_t{4}, sv, uint64_t{998}, uint64_t{1 << 20}));
    fake_.Script({});
    ASSERT_TRUE(m.SetStripeMissing(4, 10, 1000, 0b100001).ok());
    EXPECT_EQ((fake_.last_args<uint64_t, uint64_t, uint64_t, uint32_t>()),
              make_tuple(uint64_t{4}, uint64_t{10}, uint64_t{1000}, 0b100001u));
    auto refs = smp_.Make<std::vector<StripeRef>>();
    fake_.Script(refs);
    auto lr = m.ListStripes(3, 4, 500);
    ASSERT_TRUE(lr.ok());
    EXPECT_EQ(Wire(*lr), Wire(refs));
  }
}

TEST_F(MetaRpcTest, ErrorsComeBackAsTheSameStatus) {
  MetaService& m = *remote_;
  auto expect = [&](const Status& got, int code, const std::string& msg) {
    EXPECT_EQ(got.code(), code) << got.ToString();
    EXPECT_EQ(got.message(), msg);
  };
  struct Case {
    int code;
    std::function<Status()> call;
  };
  SetAttrRequest req;
  std::vector<ObsoleteStripe> obs;
  uint64_t replaced = 0;
  ObsoleteStripe one;
  std::vector<Case> cases = {
      {EIO, [&] { return m.GetGeometry().status(); }},
      {EIO, [&] { return m.GetClusterMap().status(); }},
      {EINVAL, [&] { return m.UpsertServer({}); }},
      {ENOENT, [&] { return m.SetServerState(1, ServerState::kDown); }},
      {ENOENT, [&] { return m.Lookup(1, "x").status(); }},
      {ENOENT, [&] { return m.GetAttr(1).status(); }},
      {EINVAL, [&] { return m.SetAttr(1, req, &obs).status(); }},
      {EEXIST, [&] { return m.MkNode(1, "x", 0100644, 0, 0, 0).status(); }},
      {EEXIST, [&] { return m.Mkdir(1, "x", 0755, 0, 0).status(); }},
      {ENAMETOOLONG, [&] { return m.Symlink(1, "x", "y", 0, 0).status(); }},
      {EINVAL, [&] { return m.ReadLink(1).status(); }},
      {EXDEV, [&] { return m.Link(1, 2, "x").status(); }},
      {EISDIR, [&] { return m.Unlink(1, "x").status(); }},
      {ENOTEMPTY, [&] { return m.Rmdir(1, "x"); }},
      {EEXIST, [&] { return m.Rename(1, "a", 1, "b", 1, &replaced); }},
      {ENOTDIR, [&] { return m.ReadDir(1, 0, 10).status(); }},
      {EBUSY, [&] { return m.PurgeInode(1, &obs); }},
      {EIO, [&] { return m.ListOrphans().status(); }},
      {EIO, [&] { return m.StatFs().status(); }},
      {ENOSPC, [&] { return m.SetXattr(1, "a", "b", 0); }},
      {ENODATA, [&] { return m.GetXattr(1, "a").status(); }},
      {ERANGE, [&] { return m.ListXattr(1).status(); }},
      {ENODATA, [&] { return m.RemoveXattr(1, "a"); }},
      {EIO, [&] { return m.AllocateVersions(1).status(); }},
      {ENOENT, [&] { return m.GetStripes(1, 0, 1).status(); }},
      {ESTALE, [&] { return m.CommitStripe(1, {}, 0, 0, &one); }},
      {ESTALE, [&] { return m.SetStripeMissing(1, 0, 1, 1); }},
      {EIO, [&] { return m.ListStripes(0, 0, 1).status(); }},
  };
  int i = 0;
  for (auto& c : cases) {
    std::string msg =
        "case " + std::to_string(i++) + ": what happened; what to do";
    fake_.Fail(Status(c.code, msg));
    expect(c.call(), c.code, msg);
  }
  EXPECT_EQ(cases.size(), 28u);  // every MetaService method
}

TEST_F(MetaRpcTest, ChunkMessageToMetadIsNotSupported) {
  RemoteChunkService wrong(server_->address(), key_);
  Status s = wrong.DeleteChunk({1, 2, 3}, 0);
  EXPECT_EQ(s.code(), EOPNOTSUPP);
  EXPECT_NE(s.message().find("chunkd"), std::string::npos);
}

class ChunkRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = TestKey(9);
    handler_ = std::make_unique<ChunkServiceServer>(&store_);
    StartServer("127.0.0.1:0");
    RpcClientOptions o = RemoteChunkService::DefaultOptions();
    o.call_timeout = std::chrono::milliseconds(5000);
    remote_ = std::make_unique<RemoteChunkService>(server_->address(), key_, o);
  }
  void StartServer(const std::string& listen) {
    auto s = RpcServer::Start(Quiet(listen), key_, handler_.get());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  void TearDown() override {
    store_.SetStalled(false);
    if (server_) server_->Stop();
  }
  static std::vector<uint8_t> Data(size_t n, uint32_t seed) {
    return stripefs::testing::RandomBytes(n, seed);
  }
  MemoryChunkService store_;
  std::shared_ptr<const ClusterKey> key_;
  std::unique_ptr<ChunkServiceServer> handler_;
  std::unique_ptr<RpcHandler> other_handler_;  // outlives server_
  std::unique_ptr<RpcServer> server_;
  std::unique_ptr<RemoteChunkService> remote_;
};

TEST_F(ChunkRpcTest, EveryMethodRoundTrips) {
  ChunkService& c = *remote_;
  ChunkId id{11, 22, 3};
  auto data = Data(256 * 1024, 1);
  ASSERT_TRUE(c.WriteChunk(id, 7, data).ok());
  auto r = c.ReadChunk(id, 7, 0, static_cast<uint32_t>(data.size()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, data);
  r = c.ReadChunk(id, 7, 1000, 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::vector<uint8_t>(data.begin() + 1000, data.begin() + 6000));
  r = c.ReadChunk(id, 7, 0, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());

  ASSERT_TRUE(c.WriteChunk(id, 8, Data(100, 2)).ok());
  ASSERT_TRUE(c.WriteChunk({11, 23, 0}, 8, Data(10, 3)).ok());
  auto list = c.ListChunks({}, 10);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].id, id);
  EXPECT_EQ((*list)[0].version, 7u);
  EXPECT_EQ((*list)[0].length, data.size());
  EXPECT_EQ((*list)[1].version, 8u);
  EXPECT_EQ((*list)[2].id, (ChunkId{11, 23, 0}));
  auto after = c.ListChunks((*list)[0], 1);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].version, 8u);

  ASSERT_TRUE(c.DeleteChunk(id, 8).ok());
  EXPECT_EQ(c.ReadChunk(id, 7, 0, 1).status().code(), ENOENT);
  EXPECT_TRUE(c.ReadChunk(id, 8, 0, 100).ok());

  auto st = c.Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->chunks, 2u);
  EXPECT_EQ(st->bytes_stored, 110u);
  EXPECT_EQ(st->crc_errors, 3u);
  EXPECT_EQ(st->writes, 3u);

  // CloneChunk runs server side (the fake uses the read+write default).
  ASSERT_TRUE(c.CloneChunk(id, 8, 9, 100).ok());
  auto cl = c.ReadChunk(id, 9, 0, 100);
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(*cl, Data(100, 2));
  EXPECT_EQ(c.CloneChunk(id, 7, 10, 1).code(), ENOENT);
  // PatchChunk carries only the patch; the server patches its own copy.
  auto patch = Data(10, 9);
  ASSERT_TRUE(c.PatchChunk(id, 9, 11, 100, 5, patch).ok());
  auto want = Data(100, 2);
  std::copy(patch.begin(), patch.end(), want.begin() + 5);
  EXPECT_EQ(*c.ReadChunk(id, 11, 0, 100), want);
  EXPECT_EQ(c.PatchChunk(id, 9, 12, 100, 95, patch).code(), EINVAL);
  EXPECT_EQ(c.PatchChunk(id, 7, 12, 100, 0, patch).code(), ENOENT);
  ASSERT_TRUE(c.DeleteChunkVersion(id, 11).ok());
  ASSERT_TRUE(c.DeleteChunkVersion(id, 8).ok());
  EXPECT_EQ(c.ReadChunk(id, 8, 0, 1).status().code(), ENOENT);
  EXPECT_TRUE(c.ReadChunk(id, 9, 0, 100).ok());
  // Many exact deletes in one request; absent ones are OK.
  const ChunkId other{id.inode, id.stripe + 1, id.index};
  ASSERT_TRUE(c.WriteChunk(other, 20, Data(30, 4)).ok());
  ASSERT_TRUE(c.WriteChunk(other, 21, Data(30, 5)).ok());
  const std::vector<ChunkVersion> doomed = {{other, 20}, {id, 9}, {other, 99}};
  ASSERT_TRUE(c.DeleteChunkVersions(doomed).ok());
  EXPECT_EQ(c.ReadChunk(other, 20, 0, 1).status().code(), ENOENT);
  EXPECT_EQ(c.ReadChunk(id, 9, 0, 1).status().code(), ENOENT);
  EXPECT_EQ(*c.ReadChunk(other, 21, 0, 30), Data(30, 5));
  auto ping = remote_->Ping();
  ASSERT_TRUE(ping.ok());
  EXPECT_EQ(*ping, "chunkd");
}

// A batch of chunk writes in one request: each op gets its own Status, in
// order; a failing op does not stop or undo the others.
TEST_F(ChunkRpcTest, ApplyChunkOpsAnswersPerOp) {
  ChunkService& c = *remote_;
  const ChunkId a{40, 1, 0}, b{40, 2, 5};
  ASSERT_TRUE(c.WriteChunk(a, 1, Data(100, 1)).ok());
  ASSERT_TRUE(c.WriteChunk(b, 1, Data(64, 2)).ok());
  const auto patch = Data(10, 3), whole = Data(50, 4);
  std::vector<ChunkWriteOp> ops(5);
  ops[0] = {ChunkWriteOp::Kind::kPatch, a, 1, 2, 100, 20, patch};
  ops[1] = {ChunkWriteOp::Kind::kClone, b, 1, 2, 64, 0, {}};
  ops[2] = {ChunkWriteOp::Kind::kPatch, b, 7, 3, 64, 0, patch};  // no v7
  ops[3] = {ChunkWriteOp::Kind::kWrite, {40, 3, 1}, 0, 2, 0, 0, whole};
  ops[4] = {ChunkWriteOp::Kind::kPatch, a, 1, 4, 100, 95, patch};  // past end
  const std::vector<Status> got = c.ApplyChunkOps(ops);
  ASSERT_EQ(got.size(), ops.size());
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_TRUE(got[1].ok()) << got[1].ToString();
  EXPECT_EQ(got[2].code(), ENOENT) << got[2].ToString();
  EXPECT_FALSE(got[2].message().empty());
  EXPECT_TRUE(got[3].ok()) << got[3].ToString();
  EXPECT_EQ(got[4].code(), EINVAL) << got[4].ToString();
  auto want = Data(100, 1);
  std::copy(patch.begin(), patch.end(), want.begin() + 20);
  EXPECT_EQ(*c.ReadChunk(a, 2, 0, 100), want);
  EXPECT_EQ(*c.ReadChunk(b, 2, 0, 64), Data(64, 2));
  EXPECT_EQ(c.ReadChunk(b, 3, 0, 1).status().code(), ENOENT);
  EXPECT_EQ(*c.ReadChunk({40, 3, 1}, 2, 0, 50), whole);
  EXPECT_EQ(c.ReadChunk(a, 4, 0, 1).status().code(), ENOENT);
}

// A multi-range patch makes one new version with every range replaced
// (only the ranges' bytes on the wire), alone or in a batch.
TEST_F(ChunkRpcTest, MultiRangePatchMakesOneVersion) {
  ChunkService& c = *remote_;
  const ChunkId a{43, 1, 0}, b{43, 2, 4};
  ASSERT_TRUE(c.WriteChunk(a, 1, Data(100, 1)).ok());
  ASSERT_TRUE(c.WriteChunk(b, 1, Data(64, 2)).ok());
  const std::vector<PatchRange> ranges = {{3, 4}, {40, 6}, {90, 10}};
  const auto bytes = Data(20, 7);
  auto patched = [&](std::vector<uint8_t> want) {
    size_t at = 0;
    for (const PatchRange& r : ranges) {
      std::copy(bytes.begin() + static_cast<ptrdiff_t>(at),
                bytes.begin() + static_cast<ptrdiff_t>(at + r.length),
                want.begin() + r.offset);
      at += r.length;
    }
    return want;
  };
  ASSERT_TRUE(c.PatchChunkRanges(a, 1, 2, 100, ranges, bytes).ok());
  EXPECT_EQ(*c.ReadChunk(a, 2, 0, 100), patched(Data(100, 1)));
  EXPECT_EQ(*c.ReadChunk(a, 1, 0, 100), Data(100, 1));  // source untouched
  // Bad ranges never reach the server: EINVAL.
  const std::vector<PatchRange> overlap = {{3, 10}, {5, 10}};
  EXPECT_EQ(c.PatchChunkRanges(a, 1, 3, 100, overlap, bytes).code(), EINVAL);
  EXPECT_EQ(c.PatchChunkRanges(a, 9, 3, 100, ranges, bytes).code(), ENOENT);
  // In a batch, next to single-range ops.
  const auto single = Data(8, 5);
  std::vector<ChunkWriteOp> ops(2);
  ops[0] = {ChunkWriteOp::Kind::kPatch, a, 1, 5, 100, 0, bytes, ranges};
  ops[1] = {ChunkWriteOp::Kind::kPatch, b, 1, 5, 64, 10, single};
  const std::vector<Status> got = c.ApplyChunkOps(ops);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_TRUE(got[1].ok()) << got[1].ToString();
  EXPECT_EQ(*c.ReadChunk(a, 5, 0, 100), patched(Data(100, 1)));
  auto want_b = Data(64, 2);
  std::copy(single.begin(), single.end(), want_b.begin() + 10);
  EXPECT_EQ(*c.ReadChunk(b, 5, 0, 64), want_b);
}

// Requests whose op list and bulk disagree, that name an unknown op kind,
// or whose op or range list is over its limit, are refused whole (EPROTO),
// never read past the bulk; so is one that writes a chunk version twice
// (EINVAL).
TEST_F(ChunkRpcTest, ApplyChunkOpsRejectsMalformedRequests) {
  const ChunkId a{41, 1, 0};
  ASSERT_TRUE(remote_->WriteChunk(a, 1, Data(100, 1)).ok());
  auto call = [&](std::vector<ChunkOpHeader> headers, std::vector<uint8_t> bulk,
                  std::vector<PatchRange> ranges = {}) {
    Msg<MsgType::kApplyChunkOps>::Response resp;
    return CallTyped<MsgType::kApplyChunkOps>(
        remote_->client(), {std::move(headers), std::move(ranges)}, &resp,
        bulk);
  };
  const ChunkOpHeader patch{2, a, 1, 2, 100, 0, 10};
  EXPECT_EQ(call({patch}, Data(9, 1)).code(), EPROTO);   // bulk too short
  EXPECT_EQ(call({patch}, Data(11, 1)).code(), EPROTO);  // bytes left over
  ChunkOpHeader huge = patch;
  huge.size = UINT32_MAX;
  EXPECT_EQ(call({patch, huge}, Data(10, 1)).code(), EPROTO);
  ChunkOpHeader odd = patch;
  odd.kind = 3;
  EXPECT_EQ(call({odd}, Data(10, 1)).code(), EPROTO);
  // Multi-range patches: ranges that overlap, run past the chunk, are out
  // of order or empty, do not add up to the op's bytes, are missing, are
  // left over, or belong to an op that is not a patch.
  ChunkOpHeader multi = patch;
  multi.range_count = 2;
  EXPECT_EQ(call({multi}, Data(10, 1), {{0, 5}, {4, 5}}).code(), EPROTO);
  EXPECT_EQ(call({multi}, Data(10, 1), {{0, 5}, {96, 5}}).code(), EPROTO);
  EXPECT_EQ(call({multi}, Data(10, 1), {{50, 5}, {0, 5}}).code(), EPROTO);
  EXPECT_EQ(call({multi}, Data(10, 1), {{0, 0}, {5, 10}}).code(), EPROTO);
  EXPECT_EQ(call({multi}, Data(10, 1), {{0, 5}, {50, 4}}).code(), EPROTO);
  EXPECT_EQ(call({multi}, Data(10, 1), {{0, 5}}).code(), EPROTO);
  EXPECT_EQ(call({patch}, Data(10, 1), {{0, 5}}).code(), EPROTO);
  ChunkOpHeader clone_with_ranges = multi;
  clone_with_ranges.kind = 1;
  EXPECT_EQ(call({clone_with_ranges}, Data(10, 1), {{0, 5}, {50, 5}}).code(),
            EPROTO);
  // Over the lists' limits, even when every op would be valid: one op more
  // than kMaxChunkOpsPerRequest (clones), one range more than
  // kMaxPatchRangesPerRequest (one byte every other byte of a chunk).
  std::vector<ChunkOpHeader> clones;
  for (uint64_t v = 100; v < 100 + kMaxChunkOpsPerRequest + 1; ++v)
    clones.push_back({1, a, 1, v, 100, 0, 0});
  EXPECT_EQ(call(clones, {}).code(), EPROTO);
  EXPECT_EQ(remote_->ReadChunk(a, 100, 0, 1).status().code(), ENOENT);
  const ChunkId b{41, 2, 0};
  const uint32_t n = kMaxPatchRangesPerRequest + 1;
  ASSERT_TRUE(remote_->WriteChunk(b, 1, Data(2 * n, 2)).ok());
  std::vector<PatchRange> every_other(n);
  for (uint32_t i = 0; i < n; ++i) every_other[i] = {2 * i, 1};
  const ChunkOpHeader many{2, b, 1, 2, 2 * n, 0, n, n};
  EXPECT_EQ(call({many}, Data(n, 3), every_other).code(), EPROTO);
  EXPECT_EQ(remote_->ReadChunk(b, 2, 0, 1).status().code(), ENOENT);
  // Two ops writing one (id, version) would race in the store.
  EXPECT_EQ(call({patch, patch}, Data(20, 1)).code(), EINVAL);
  EXPECT_EQ(remote_->ReadChunk(a, 2, 0, 1).status().code(), ENOENT);
  ASSERT_TRUE(call({patch}, Data(10, 1)).ok());
  EXPECT_TRUE(remote_->ReadChunk(a, 2, 0, 100).ok());
}

// One request for several reads: each gets its own Status (a missing
// version or a range past the end fails alone) and the OK ones their
// bytes; a request over the read-count or byte limit is refused whole
// (EPROTO) before anything is sized by it.
TEST_F(ChunkRpcTest, ReadChunkRangesAnswersEachRead) {
  const ChunkId a{43, 1, 0}, b{43, 2, 1};
  const auto da = Data(10000, 1), db = Data(300, 2);
  ASSERT_TRUE(remote_->WriteChunk(a, 1, da).ok());
  ASSERT_TRUE(remote_->WriteChunk(b, 7, db).ok());
  std::vector<uint8_t> o1(100), o2(50), o3(10), o4(20), o5(4096);
  const std::vector<ChunkRangeRead> reads = {
      {a, 1, 0, o1},      // ok
      {b, 8, 0, o2},      // no such version
      {b, 7, 295, o3},    // past the end
      {b, 7, 280, o4},    // ok, the chunk's last bytes
      {a, 1, 4000, o5}};  // ok
  const auto got = remote_->ReadChunkRanges(reads, Deadline::max());
  ASSERT_EQ(got.size(), 5u);
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_EQ(got[1].code(), ENOENT) << got[1].ToString();
  EXPECT_EQ(got[2].code(), EINVAL) << got[2].ToString();
  EXPECT_TRUE(got[3].ok()) << got[3].ToString();
  EXPECT_TRUE(got[4].ok()) << got[4].ToString();
  EXPECT_TRUE(std::equal(o1.begin(), o1.end(), da.begin()));
  EXPECT_TRUE(std::equal(o4.begin(), o4.end(), db.begin() + 280));
  EXPECT_TRUE(std::equal(o5.begin(), o5.end(), da.begin() + 4000));

  auto call = [&](std::vector<ChunkReadHeader> headers) {
    Msg<MsgType::kReadChunkRanges>::Response resp;
    return CallTyped<MsgType::kReadChunkRanges>(remote_->client(),
                                                {std::move(headers)}, &resp);
  };
  std::vector<ChunkReadHeader> many(kMaxChunkReadsPerRequest + 1,
                                    ChunkReadHeader{a, 1, 0, 1});
  EXPECT_EQ(call(many).code(), EPROTO);
  // Two reads of 2 GiB each: refused before any buffer is sized by them.
  EXPECT_EQ(call({{a, 1, 0, 1u << 31}, {a, 1, 0, 1u << 31}}).code(), EPROTO);
  EXPECT_TRUE(call({{a, 1, 0, 1}}).ok());
}

// ReadChunk's length is checked against the wire limit before the reply
// buffer is sized by it (issue 35): a 4 GiB request is refused with EPROTO
// naming the limit, and the store is never asked (before, the server sized
// a 4 GiB buffer and the store then refused the read as past the end).
TEST_F(ChunkRpcTest, OversizedReadChunkIsRefusedBeforeAllocation) {
  const ChunkId a{44, 1, 0};
  ASSERT_TRUE(remote_->WriteChunk(a, 1, Data(100, 3)).ok());
  auto call = [&](uint32_t length) {
    Msg<MsgType::kReadChunk>::Response resp;
    AlignedBytes bulk;
    return CallTyped<MsgType::kReadChunk>(remote_->client(),
                                          {a, 1, 0, length}, &resp, {}, &bulk);
  };
  for (uint32_t length : {kMaxBulk + 1, 0xffffffffu}) {
    Status s = call(length);
    EXPECT_EQ(s.code(), EPROTO) << s.ToString();
    EXPECT_NE(s.message().find("at most " + std::to_string(kMaxBulk)),
              std::string::npos)
        << s.ToString();
  }
  EXPECT_TRUE(call(100).ok());
}

// A chunkd from before ApplyChunkOps answers EOPNOTSUPP: the stub then
// sends the ops one by one, with the same per-op results.
class OldChunkServer final : public RpcHandler {
 public:
  explicit OldChunkServer(ChunkService* s) : inner_(s) {}
  std::string Role() const override { return "chunkd"; }
  void Handle(const rpc::Caller& caller, uint16_t type,
              std::span<const uint8_t> payload, AlignedBytes& bulk,
              RpcReply* reply) override {
    if (type == static_cast<uint16_t>(MsgType::kApplyChunkOps) ||
        type == static_cast<uint16_t>(MsgType::kReadChunkRanges)) {
      ++refused;
      reply->payload = EncodeErrorResponse(Status::NotSupported("old chunkd"));
      return;
    }
    inner_.Handle(caller, type, payload, bulk, reply);
  }
  std::atomic<int> refused{0};

 private:
  ChunkServiceServer inner_;
};

class OldChunkdTest : public ChunkRpcTest {
 protected:
  // Restarts the server as a chunkd from before ApplyChunkOps and
  // ReadChunkRanges (owned by the fixture).
  OldChunkServer* ServeAsAnOldChunkd() {
    server_->Stop();
    auto* old = new OldChunkServer(&store_);
    other_handler_.reset(old);
    auto s = RpcServer::Start(Quiet(), key_, old);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) server_ = std::move(s).value();
    return old;
  }
  static RpcClientOptions FallbackOptions() {
    RpcClientOptions o = RemoteChunkService::DefaultOptions();
    o.call_timeout = std::chrono::milliseconds(5000);
    return o;
  }
};

TEST_F(OldChunkdTest, ApplyChunkOpsFallsBackOnAnOldChunkd) {
  OldChunkServer* old = ServeAsAnOldChunkd();
  ASSERT_FALSE(HasFailure());
  RemoteChunkService c(server_->address(), key_, FallbackOptions());
  const ChunkId a{42, 1, 0};
  ASSERT_TRUE(c.WriteChunk(a, 1, Data(100, 1)).ok());
  const auto patch = Data(10, 3);
  std::vector<ChunkWriteOp> ops(3);
  ops[0] = {ChunkWriteOp::Kind::kPatch, a, 1, 2, 100, 0, patch};
  ops[1] = {ChunkWriteOp::Kind::kClone, a, 9, 3, 100, 0, {}};  // no v9
  ops[2] = {ChunkWriteOp::Kind::kClone, a, 1, 4, 100, 0, {}};
  const std::vector<Status> got = c.ApplyChunkOps(ops);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_GE(old->refused.load(), 1);
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_EQ(got[1].code(), ENOENT) << got[1].ToString();
  EXPECT_TRUE(got[2].ok()) << got[2].ToString();
  auto want = Data(100, 1);
  std::copy(patch.begin(), patch.end(), want.begin());
  EXPECT_EQ(*c.ReadChunk(a, 2, 0, 100), want);
  EXPECT_EQ(*c.ReadChunk(a, 4, 0, 100), Data(100, 1));
  // A multi-range patch, alone or in a batch: the old chunkd has no
  // message for it, so the stub reads the source and writes the result.
  const std::vector<PatchRange> ranges = {{0, 2}, {50, 3}};
  const auto five = Data(5, 6);
  auto multi = Data(100, 1);
  std::copy(five.begin(), five.begin() + 2, multi.begin());
  std::copy(five.begin() + 2, five.end(), multi.begin() + 50);
  const int refused = old->refused.load();
  ASSERT_TRUE(c.PatchChunkRanges(a, 1, 5, 100, ranges, five).ok());
  EXPECT_GT(old->refused.load(), refused);
  EXPECT_EQ(*c.ReadChunk(a, 5, 0, 100), multi);
  std::vector<ChunkWriteOp> batch(2);
  batch[0] = {ChunkWriteOp::Kind::kPatch, a, 1, 6, 100, 0, five, ranges};
  batch[1] = {ChunkWriteOp::Kind::kClone, a, 1, 7, 100, 0, {}};
  const std::vector<Status> done = c.ApplyChunkOps(batch);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_TRUE(done[0].ok()) << done[0].ToString();
  EXPECT_TRUE(done[1].ok()) << done[1].ToString();
  EXPECT_EQ(*c.ReadChunk(a, 6, 0, 100), multi);
}

// ... and ReadChunkRanges one read at a time, with the same results.
TEST_F(OldChunkdTest, ReadChunkRangesFallsBackOnAnOldChunkd) {
  OldChunkServer* old = ServeAsAnOldChunkd();
  ASSERT_FALSE(HasFailure());
  RemoteChunkService c(server_->address(), key_, FallbackOptions());
  const ChunkId a{44, 1, 0};
  const auto da = Data(500, 4);
  ASSERT_TRUE(c.WriteChunk(a, 1, da).ok());
  std::vector<uint8_t> o1(100), o2(10);
  const std::vector<ChunkRangeRead> reads = {{a, 1, 400, o1}, {a, 2, 0, o2}};
  const auto got = c.ReadChunkRanges(reads, Deadline::max());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_GE(old->refused.load(), 1);
  EXPECT_TRUE(got[0].ok()) << got[0].ToString();
  EXPECT_EQ(got[1].code(), ENOENT) << got[1].ToString();
  EXPECT_TRUE(std::equal(o1.begin(), o1.end(), da.begin() + 400));
}

TEST_F(ChunkRpcTest, ErrorsComeBackAsTheSameStatus) {
  ChunkService& c = *remote_;
  auto r = c.ReadChunk({1, 1, 1}, 1, 0, 10);
  EXPECT_EQ(r.status().code(), ENOENT);
  EXPECT_EQ(r.status().message(), "chunk 1/1/1 v1 not stored");
  ASSERT_TRUE(c.WriteChunk({1, 1, 1}, 1, Data(10, 1)).ok());
  EXPECT_EQ(c.ReadChunk({1, 1, 1}, 1, 5, 10).status().code(), EINVAL);
  store_.SetWriteError(Status::NoSpace("disk full on /data; free space"));
  Status s = c.WriteChunk({1, 1, 2}, 1, Data(10, 1));
  EXPECT_EQ(s.code(), ENOSPC);
  EXPECT_EQ(s.message(), "disk full on /data; free space");
  EXPECT_FALSE(IsTransportError(s));
}

TEST_F(ChunkRpcTest, LargeChunkRoundTrips) {
  auto data = Data(8 << 20, 5);
  ASSERT_TRUE(remote_->WriteChunk({1, 2, 3}, 4, data).ok());
  auto r =
      remote_->ReadChunk({1, 2, 3}, 4, 0, static_cast<uint32_t>(data.size()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r == data);
}

TEST_F(ChunkRpcTest, StalledServerTimesOutThenRecovers) {
  ASSERT_TRUE(remote_->WriteChunk({1, 1, 1}, 1, Data(64, 1)).ok());
  RpcClientOptions o = RemoteChunkService::DefaultOptions();
  o.call_timeout = std::chrono::milliseconds(200);
  RemoteChunkService impatient(server_->address(), key_, o);
  store_.SetStalled(true);
  auto r = impatient.ReadChunk({1, 1, 1}, 1, 0, 64);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ETIMEDOUT);
  EXPECT_TRUE(IsTransportError(r.status()));
  EXPECT_NE(r.status().message().find(server_->address()), std::string::npos);
  EXPECT_EQ(store_.reads_started(), 1u);  // it really was the server stalling
  store_.SetStalled(false);
  r = impatient.ReadChunk({1, 1, 1}, 1, 0, 64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, Data(64, 1));
}

TEST_F(ChunkRpcTest, ReadChunkIntoReceivesStraightIntoTheCallersBuffer) {
  const ChunkId id{5, 6, 1};
  auto data = Data(300 * 1024, 8);
  ASSERT_TRUE(remote_->WriteChunk(id, 3, data).ok());
  std::vector<uint8_t> buf(5000, 0xEE);
  Status st = remote_->ReadChunkInto(id, 3, 1000, std::span(buf).first(4000));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + 4000, data.begin() + 1000));
  EXPECT_EQ(buf[4000], 0xEE);  // nothing written past the span
  std::vector<uint8_t> whole(data.size());
  ASSERT_TRUE(remote_->ReadChunkInto(id, 3, 0, whole).ok());
  EXPECT_TRUE(whole == data);
  // The same errors as ReadChunk, and the connection stays in step.
  EXPECT_EQ(remote_->ReadChunkInto(id, 4, 0, buf).code(), ENOENT);
  EXPECT_EQ(remote_
                ->ReadChunkInto(id, 3, static_cast<uint32_t>(data.size()) - 10,
                                std::span(buf).first(20))
                .code(),
            EINVAL);
  auto r = remote_->ReadChunk(id, 3, 7, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::vector<uint8_t>(data.begin() + 7, data.begin() + 17));
}

TEST_F(ChunkRpcTest, BoundedReadStopsAtItsDeadlineThenRecovers) {
  const ChunkId id{1, 1, 1};
  ASSERT_TRUE(remote_->WriteChunk(id, 1, Data(64, 1)).ok());
  std::vector<uint8_t> buf(64);
  store_.SetStalled(true);
  Status st = remote_->ReadChunkIntoBy(
      id, 1, 0, buf, Clock::now() + std::chrono::milliseconds(100));
  EXPECT_EQ(st.code(), ETIMEDOUT) << st.ToString();
  EXPECT_TRUE(IsTransportError(st));
  EXPECT_EQ(store_.reads_started(), 1u);  // the server really stalled
  store_.SetStalled(false);
  st = remote_->ReadChunkIntoBy(id, 1, 0, buf,
                                Clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(buf, Data(64, 1));
}

TEST_F(ChunkRpcTest, UnreachableServerIsHostDownWithAddressAndHint) {
  std::string addr = server_->address();
  server_->Stop();
  server_.reset();
  auto r = remote_->ReadChunk({1, 1, 1}, 1, 0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EHOSTDOWN);
  EXPECT_NE(r.status().message().find(addr), std::string::npos);
  EXPECT_NE(r.status().message().find("is chunkd running"), std::string::npos);
}

TEST_F(ChunkRpcTest, ReconnectsAfterServerRestart) {
  ASSERT_TRUE(remote_->WriteChunk({1, 1, 1}, 1, Data(64, 1)).ok());
  std::string addr = server_->address();
  server_->Stop();
  server_.reset();
  EXPECT_EQ(remote_->Stats().status().code(), EHOSTDOWN);
  StartServer(addr);  // same port: the pooled connection is now stale
  ASSERT_EQ(server_->address(), addr);
  auto r = remote_->ReadChunk({1, 1, 1}, 1, 0, 64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Also a non-idempotent path: write goes through on a fresh connection.
  EXPECT_TRUE(remote_->WriteChunk({1, 1, 2}, 1, Data(8, 2)).ok());
}

TEST_F(ChunkRpcTest, EightThreadsConcurrently) {
  constexpr int kThreads = 8, kOps = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        ChunkId id{static_cast<uint64_t>(t), static_cast<uint64_t>(i), 0};
        auto d = Data(4096 + 97 * i, t * 1000 + i);
        if (!remote_->WriteChunk(id, 1, d).ok()) ++failures;
        auto r = remote_->ReadChunk(id, 1, 0, static_cast<uint32_t>(d.size()));
        if (!r.ok() || *r != d) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto st = remote_->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->chunks, uint64_t{kThreads * kOps});
  EXPECT_GT(server_->counters().connections, 1u);  // really parallel
}

TEST_F(ChunkRpcTest, WrongKeyIsRejectedCountedAndExplained) {
  RemoteChunkService intruder(server_->address(), TestKey(1));
  auto r = intruder.Stats();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EACCES);
  EXPECT_NE(r.status().message().find("cluster key"), std::string::npos);
  // The intruder refuses the server's proof and sends none of its own (no
  // HMAC oracle): the server counts a handshake cut short.
  for (int i = 0; i < 2000 && server_->counters().rejected_truncated == 0; ++i)
    ::usleep(10000);
  EXPECT_EQ(server_->counters().rejected_truncated, 1u);
  EXPECT_EQ(server_->counters().rejected_total(), 1u);
  EXPECT_TRUE(remote_->Stats().ok());  // the server lives on
}

// Sends raw bytes on `fd` and returns what the server answered before
// closing.
std::vector<uint8_t> SendRawOn(int fd, const std::vector<uint8_t>& bytes,
                               bool close_write) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n =
        ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (close_write) ::shutdown(fd, SHUT_WR);
  std::vector<uint8_t> got;
  for (int i = 0; i < 500; ++i) {  // bounded: at most ~5 s
    uint8_t buf[256];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      got.insert(got.end(), buf, buf + n);
      continue;
    }
    if (n == 0) break;
    if (errno == EAGAIN) {
      ::usleep(10000);
      continue;
    }
    break;
  }
  return got;
}

// Before the handshake.
std::vector<uint8_t> SendRaw(const std::string& addr,
                             const std::vector<uint8_t>& bytes,
                             bool close_write) {
  auto fd = ConnectTcp(addr, Clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(fd.ok());
  return fd.ok() ? SendRawOn(fd->get(), bytes, close_write)
                 : std::vector<uint8_t>();
}

TEST_F(ChunkRpcTest, MalformedFramesAreRejectedAndCounted) {
  std::string addr = server_->address();
  // Garbage: bad magic.
  auto got = SendRaw(addr, std::vector<uint8_t>(64, 'G'), false);
  ASSERT_GE(got.size(), kFrameHeaderSize);
  EXPECT_EQ(got[5], kFlagReject);
  EXPECT_EQ(server_->counters().rejected_bad_header, 1u);
  // Oversize length (after the handshake).
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kChunkStats);
  h.bulk_len = kMaxBulk + 1;
  std::vector<uint8_t> hdr(kFrameHeaderSize);
  EncodeHeader(h, hdr.data());
  auto c = testing::OpenRawSession(addr, *key_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  SendRawOn(c->get(), hdr, false);
  EXPECT_EQ(server_->counters().rejected_oversize, 1u);
  // Tampered frame: the tag fails.
  c = testing::OpenRawSession(addr, *key_);
  ASSERT_TRUE(c.ok());
  auto frame = EncodeFrame(c->s.send, h = FrameHeader{}, {}, {});
  frame[8] ^= 1;  // request id byte
  SendRawOn(c->get(), frame, false);
  EXPECT_EQ(server_->counters().rejected_bad_mac, 1u);
  // Truncated: half a frame, then the client closes.
  c = testing::OpenRawSession(addr, *key_);
  ASSERT_TRUE(c.ok());
  frame =
      EncodeFrame(c->s.send, FrameHeader{}, std::vector<uint8_t>(40, 1), {});
  frame.resize(50);
  SendRawOn(c->get(), frame, true);
  EXPECT_EQ(server_->counters().rejected_truncated, 1u);
  // Bad version: a version-1 client's first frame.
  h = FrameHeader{};
  h.version = 1;
  std::vector<uint8_t> v1(kFrameHeaderSize + kMacSize);
  EncodeHeader(h, v1.data());
  got = SendRaw(addr, v1, false);
  EXPECT_EQ(server_->counters().rejected_bad_header, 2u);
  // A valid frame with a malformed payload gets an EPROTO answer.
  c = testing::OpenRawSession(addr, *key_);
  ASSERT_TRUE(c.ok());
  h = FrameHeader{};
  h.type = static_cast<uint16_t>(MsgType::kReadChunk);
  h.request_id = 5;
  got = SendRawOn(c->get(),
                  EncodeFrame(c->s.send, h, std::vector<uint8_t>{1, 2, 3}, {}),
                  true);
  auto resp = DecodeFrame(c->s.recv, got);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->header.request_id, 5u);
  Status remote;
  Msg<MsgType::kReadChunk>::Response r;
  ASSERT_TRUE(DecodeResponse<MsgType::kReadChunk>(resp->payload, &remote, &r));
  EXPECT_EQ(remote.code(), EPROTO);
  // Through all this the server keeps serving.
  EXPECT_TRUE(remote_->Stats().ok());
  EXPECT_EQ(server_->counters().rejected_total(), 5u);
}

// The one response decoder behind CallTyped and CallTypedInto: results on
// OK, the remote Status as sent, and EPROTO naming the message, the peer's
// role and address for a payload that does not decode.
TEST(TypedCallTest, DecodeTypedResponseResultsRemoteErrorsAndMalformed) {
  RpcClient client("127.0.0.1:9", TestKey(1),
                   RemoteChunkService::DefaultOptions());
  using Ping = Msg<MsgType::kPing>;
  const Ping::Response sent{"chunkd", 7};
  const std::vector<uint8_t> ok =
      EncodeResponse<MsgType::kPing>(Status::Ok(), sent);
  Ping::Response got{};
  Status s = DecodeTypedResponse<MsgType::kPing>(client, ok, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got, sent);

  s = DecodeTypedResponse<MsgType::kPing>(
      client, EncodeErrorResponse(Status::NotFound("no such chunk")), &got);
  EXPECT_EQ(s.code(), ENOENT);
  EXPECT_NE(s.message().find("no such chunk"), std::string::npos);

  const std::vector<uint8_t> truncated(ok.begin(), ok.end() - 1);
  s = DecodeTypedResponse<MsgType::kPing>(client, truncated, &got);
  EXPECT_EQ(s.code(), EPROTO);
  for (const std::string& part :
       {std::string("malformed ") +
            MsgTypeName(static_cast<uint16_t>(MsgType::kPing)),
        std::string("from chunkd at 127.0.0.1:9")}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << s.ToString();
  }
}

TEST(RpcClientTest, BadAddressIsInvalidArgument) {
  RemoteChunkService c("127.0.0.1:notaport", TestKey(1));
  auto r = c.Stats();
  EXPECT_EQ(r.status().code(), EINVAL);
  EXPECT_NE(r.status().message().find("notaport"), std::string::npos);
}

TEST(RpcServerTest, ListensOnLoopbackByDefaultAndPortOnlyMeansLoopback) {
  MemoryChunkService store;
  ChunkServiceServer handler(&store);
  auto s = RpcServer::Start(Quiet(), TestKey(1), &handler);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->address().rfind("127.0.0.1:", 0), 0u);
  auto hp = ParseHostPort("7001");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 7001);
  EXPECT_FALSE(ParseHostPort("host:70000").ok());
  EXPECT_FALSE(ParseHostPort("").ok());
  (*s)->Stop();
}

}  // namespace
}  // namespace stripefs::rpc

// metad's inline policy: MetaStore::InlineCapabilities and
// rpc::MetaInlineHandler (which requests may run on the RPC loop thread),
// and a MetaStore served over RPC with it, where reads and unsynced
// namespace changes run inline and everything that syncs goes to workers.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <string>

#include "backend/meta/meta_store.h"
#include "backend/rpc/meta_inline_handler.h"
#include "backend/rpc/meta_service_server.h"
#include "backend/rpc/remote_meta_service.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/wire_messages.h"
#include "tests/meta/meta_test_util.h"
#include "tests/rpc/test_sessions.h"

namespace stripefs {
namespace {

using rpc::MsgType;
using testing::TempDir;

std::unique_ptr<MetaStore> NewStore(const TempDir& tmp,
                                    std::chrono::milliseconds sync_delay,
                                    bool sync = true) {
  MetaStoreOptions o;
  o.namespace_sync_delay = sync_delay;
  o.sync = sync;
  auto s = MetaStore::Create(tmp.sub("m"), {4, 2, 4096}, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) std::abort();
  return std::move(s).value();
}

// An inner handler that must never be called by InlineSafe.
class NoCalls : public rpc::RpcHandler {
 public:
  std::string Role() const override { return "metad"; }
  void Handle(const rpc::Caller&, uint16_t, std::span<const uint8_t>,
              AlignedBytes&, rpc::RpcReply*) override {
    ADD_FAILURE() << "InlineSafe must not handle the request";
  }
};

template <MsgType T>
bool Safe(const rpc::MetaInlineHandler& h,
          const typename rpc::Msg<T>::Request& req) {
  return h.InlineSafe(static_cast<uint16_t>(T), rpc::EncodeRequest<T>(req));
}

TEST(MetaInlinePolicy, CapabilitiesFollowTheSyncMode) {
  {
    TempDir tmp;
    auto s = NewStore(tmp, std::chrono::milliseconds(0));
    MetaInlineCaps c = s->InlineCapabilities();
    EXPECT_TRUE(c.reads);
    EXPECT_FALSE(c.namespace_writes);  // every change waits for its fsync
  }
  {
    TempDir tmp;
    auto s = NewStore(tmp, std::chrono::milliseconds(5));
    MetaInlineCaps c = s->InlineCapabilities();
    EXPECT_TRUE(c.reads);
    EXPECT_TRUE(c.namespace_writes);
  }
  {
    TempDir tmp;
    auto s = NewStore(tmp, std::chrono::milliseconds(0), /*sync=*/false);
    EXPECT_TRUE(s->InlineCapabilities().namespace_writes);
  }
}

TEST(MetaInlinePolicy, ReadsAndUnsyncedNamespaceChangesOnlyAndBounded) {
  TempDir tmp;
  auto store = NewStore(tmp, std::chrono::hours(1));
  NoCalls inner;
  rpc::MetaInlineHandler h(&inner, store.get());
  EXPECT_EQ(h.Role(), "metad");
  // Reads.
  EXPECT_TRUE(Safe<MsgType::kLookup>(h, {1, "x"}));
  EXPECT_TRUE(Safe<MsgType::kGetAttr>(h, {1}));
  EXPECT_TRUE(Safe<MsgType::kReadLink>(h, {2}));
  EXPECT_TRUE(Safe<MsgType::kGetXattr>(h, {1, "user.a"}));
  EXPECT_TRUE(Safe<MsgType::kListXattr>(h, {1}));
  EXPECT_TRUE(Safe<MsgType::kStatFs>(h, {}));
  EXPECT_TRUE(Safe<MsgType::kGetGeometry>(h, {}));
  EXPECT_TRUE(Safe<MsgType::kReadDir>(h, {1, 0, 100}));
  EXPECT_TRUE(
      Safe<MsgType::kReadDir>(h, {1, 0, rpc::kMaxInlineReadDirEntries}));
  EXPECT_FALSE(
      Safe<MsgType::kReadDir>(h, {1, 0, rpc::kMaxInlineReadDirEntries + 1}));
  EXPECT_TRUE(Safe<MsgType::kGetStripes>(h, {2, 0, 8}));
  EXPECT_FALSE(Safe<MsgType::kGetStripes>(h, {2, 0, 1u << 20}));
  // Namespace changes (acknowledged before the sync here).
  EXPECT_TRUE(Safe<MsgType::kMkNode>(h, {1, "f", S_IFREG | 0644, 0, 0, 0}));
  EXPECT_TRUE(Safe<MsgType::kMkdir>(h, {1, "d", 0755, 0, 0}));
  EXPECT_TRUE(Safe<MsgType::kUnlink>(h, {1, "f"}));
  EXPECT_TRUE(Safe<MsgType::kRename>(h, {1, "a", 1, "b", 0}));
  EXPECT_TRUE(Safe<MsgType::kSetXattr>(h, {1, "user.a", "v", 0}));
  SetAttrRequest chmod;
  chmod.mask = kSetMode;
  EXPECT_TRUE(Safe<MsgType::kSetAttr>(h, {2, chmod}));
  SetAttrRequest trunc;
  trunc.mask = kSetSize | kSetMode;
  EXPECT_FALSE(Safe<MsgType::kSetAttr>(h, {2, trunc}));  // durable
  // Everything that syncs, may be large, or is not the metad's.
  EXPECT_FALSE(Safe<MsgType::kAllocateVersions>(h, {1}));
  EXPECT_FALSE(Safe<MsgType::kSyncMetadata>(h, {}));
  EXPECT_FALSE(Safe<MsgType::kGetClusterMap>(h, {}));
  EXPECT_FALSE(Safe<MsgType::kPurgeInode>(h, {2}));
  EXPECT_FALSE(Safe<MsgType::kListOrphans>(h, {}));
  EXPECT_FALSE(Safe<MsgType::kDropStripes>(h, {2, 0, 1}));
  EXPECT_FALSE(h.InlineSafe(static_cast<uint16_t>(MsgType::kCommitStripe),
                            std::vector<uint8_t>(64, 0)));
  EXPECT_FALSE(h.InlineSafe(0x7E01, {}));  // unknown type
  // A payload that does not decode goes to a worker, which answers the
  // error as before.
  const uint8_t junk[3] = {1, 2, 3};
  EXPECT_FALSE(h.InlineSafe(static_cast<uint16_t>(MsgType::kReadDir), junk));
  EXPECT_FALSE(h.InlineSafe(static_cast<uint16_t>(MsgType::kSetAttr), junk));
}

TEST(MetaInlinePolicy, SyncEveryChangeKeepsMutationsOnWorkers) {
  TempDir tmp;
  auto store = NewStore(tmp, std::chrono::milliseconds(0));
  NoCalls inner;
  rpc::MetaInlineHandler h(&inner, store.get());
  EXPECT_TRUE(Safe<MsgType::kGetAttr>(h, {1}));
  EXPECT_FALSE(Safe<MsgType::kMkNode>(h, {1, "f", S_IFREG | 0644, 0, 0, 0}));
  EXPECT_FALSE(Safe<MsgType::kUnlink>(h, {1, "f"}));
}

// The whole path: a client creates, looks up, reads and removes files of a
// MetaStore served through MetaInlineHandler; answers are right, the cheap
// calls ran inline and the syncing ones did not.
TEST(MetaInlinePolicy, ServedOverRpcInlineWhereSafe) {
  TempDir tmp;
  auto store = NewStore(tmp, std::chrono::milliseconds(5));
  rpc::MetaServiceServer served(store.get());
  rpc::MetaInlineHandler h(&served, store.get());
  rpc::RpcServerOptions o;
  o.log_name = "meta-inline-test";
  auto key = testing::TestKey(3);
  auto server = rpc::RpcServer::Start(o, key, &h);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  rpc::RemoteMetaService remote((*server)->address(), key);
  constexpr int kFiles = 20;
  for (int i = 0; i < kFiles; ++i) {
    std::string name = "f" + std::to_string(i);
    auto a = remote.MkNode(kRootInode, name, S_IFREG | 0644, 1, 2, 0);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto l = remote.Lookup(kRootInode, name);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->ino, a->ino);
    auto g = remote.GetAttr(a->ino);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->uid, 1u);
  }
  auto dir = remote.ReadDir(kRootInode, 0, 100);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->size(), size_t{kFiles + 2});  // . and ..
  // Syncing calls: a version reservation and a stripe commit.
  auto v = remote.AllocateVersions(1);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  auto f0 = remote.Lookup(kRootInode, "f0");
  ASSERT_TRUE(f0.ok());
  ASSERT_TRUE(
      remote.CommitStripe(f0->ino, {0, *v, 0, 4096}, 0, 4096, nullptr).ok());
  ASSERT_TRUE(remote.Sync().ok());
  for (int i = 0; i < kFiles; ++i)
    ASSERT_TRUE(remote.Unlink(kRootInode, "f" + std::to_string(i)).ok());
  EXPECT_EQ(remote.Lookup(kRootInode, "f3").status().code(), ENOENT);
  auto c = (*server)->counters();
  // 3 per file + ReadDir + Lookup f0 + Unlinks + the failed Lookup inline;
  // AllocateVersions, CommitStripe, Sync on workers.
  const uint64_t inline_calls = 3 * kFiles + 1 + 1 + kFiles + 1;
  if ((*server)->using_io_uring()) {
    EXPECT_EQ(c.inline_requests, inline_calls);
    EXPECT_EQ(c.requests - c.inline_requests, 3u);
  } else {
    std::fprintf(stderr, "io_uring unavailable: inline handling not tested\n");
    EXPECT_EQ(c.inline_requests, 0u);
  }
  (*server)->Stop();
}

}  // namespace
}  // namespace stripefs

#include "fuse/replier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "fuse/dev_transport.h"
#include "tests/support/fake_inflight.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT
using stripefs::testing::FakeInFlight;
using stripefs::testing::RecordedReply;

TEST(Replier, EntryAttrOpenCreateBodies) {
  RecordedReply rec;
  FakeInFlight f(&rec);
  fuse_entry_out e{};
  e.nodeid = 42;
  e.attr.size = 1234;
  Replier(&f, nullptr).Entry(e);
  ASSERT_TRUE(rec.done);
  EXPECT_EQ(rec.error, 0);
  ASSERT_EQ(rec.body.size(), sizeof(fuse_entry_out));
  fuse_entry_out got;
  std::memcpy(&got, rec.body.data(), sizeof(got));
  EXPECT_EQ(got.nodeid, 42u);
  EXPECT_EQ(got.attr.size, 1234u);

  fuse_open_out o{};
  o.fh = 7;
  Replier(&f, nullptr).Create(e, o);
  ASSERT_EQ(rec.body.size(), sizeof(fuse_entry_out) + sizeof(fuse_open_out));
  fuse_open_out go;
  std::memcpy(&go, rec.body.data() + sizeof(fuse_entry_out), sizeof(go));
  EXPECT_EQ(go.fh, 7u);

  Replier(&f, nullptr).Written(4096);
  ASSERT_EQ(rec.body.size(), sizeof(fuse_write_out));
  fuse_write_out w;
  std::memcpy(&w, rec.body.data(), sizeof(w));
  EXPECT_EQ(w.size, 4096u);
}

TEST(Replier, ErrorsArePositiveAndBodiless) {
  RecordedReply rec;
  FakeInFlight f(&rec);
  Replier(&f, nullptr).Error(ENOENT);
  EXPECT_EQ(rec.error, ENOENT);
  EXPECT_TRUE(rec.body.empty());
  Replier(&f, nullptr).Error(-EIO);  // tolerated
  EXPECT_EQ(rec.error, EIO);
}

TEST(Replier, DataIsNotCopiedBeforeTheTransport) {
  RecordedReply rec;
  FakeInFlight f(&rec);
  std::string big(1 << 20, 'z');
  Replier(&f, nullptr).Data(std::string_view(big));
  EXPECT_EQ(rec.first_base, big.data());
  EXPECT_EQ(rec.body.size(), big.size());
}

TEST(Replier, DroppedReplierAnswersEioOnce) {
  RecordedReply rec;
  FakeInFlight f(&rec);
  { Replier r(&f, nullptr); }
  EXPECT_TRUE(rec.done);
  EXPECT_EQ(rec.error, EIO);
  rec = {};
  Replier r(&f, nullptr);
  Replier moved = std::move(r);
  EXPECT_FALSE(r.valid());
  moved.Ok();
  EXPECT_TRUE(rec.done);
  rec = {};
  moved.Error(EIO);  // spent: ignored
  EXPECT_FALSE(rec.done);
}

// Counts OnReply calls and checks they come before the transport's reply.
class CountingObserver : public ReplyObserver {
 public:
  explicit CountingObserver(const RecordedReply* rec) : rec_(rec) {}
  void OnReply(InFlight*) override {
    ++calls;
    if (rec_->done) replied_first = true;
  }
  int calls = 0;
  bool replied_first = false;

 private:
  const RecordedReply* rec_;
};

TEST(Replier, ObserverHearsEveryReplyOnceAndFirst) {
  RecordedReply rec;
  FakeInFlight f(&rec);
  CountingObserver obs(&rec);
  Replier(&f, &obs).Written(1);
  EXPECT_EQ(obs.calls, 1);
  rec = {};
  { Replier dropped(&f, &obs); }  // answers EIO, observer still told
  EXPECT_EQ(rec.error, EIO);
  EXPECT_EQ(obs.calls, 2);
  rec = {};
  Replier a(&f, &obs);
  Replier b = std::move(a);
  b.Ok();
  b.Ok();  // spent
  EXPECT_EQ(obs.calls, 3);
  EXPECT_FALSE(obs.replied_first);
}

TEST(Replier, CopyFileRangeReplyDependsOnOpcode) {
  RecordedReply rec;
  FakeInFlight f(&rec);
  f.ctx.opcode = FUSE_COPY_FILE_RANGE;
  Replier(&f, nullptr).CopyFileRange(100);
  EXPECT_EQ(rec.body.size(), sizeof(fuse_write_out));
  f.ctx.opcode = FUSE_COPY_FILE_RANGE_64;
  Replier(&f, nullptr).CopyFileRange(1ull << 33);
  ASSERT_EQ(rec.body.size(), sizeof(fuse_copy_file_range_out));
  uint64_t v;
  std::memcpy(&v, rec.body.data(), 8);
  EXPECT_EQ(v, 1ull << 33);
}

// DevTransport::WriteReply frames header + body in one writev.
TEST(DevReply, HeaderAndBodyInOneWritev) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  int efd = ::eventfd(0, EFD_CLOEXEC);
  DevTransport t(p[1], efd, {});
  std::string a = "hello ", b = "world";
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  ASSERT_EQ(t.WriteReply(99, 0, iov), 0);
  ASSERT_EQ(t.WriteReply(100, ENOENT, iov), 0);
  uint8_t buf[256];
  ssize_t n = ::read(p[0], buf, sizeof(buf));
  ASSERT_EQ(n, static_cast<ssize_t>(2 * sizeof(fuse_out_header) + 11));
  fuse_out_header h;
  std::memcpy(&h, buf, sizeof(h));
  EXPECT_EQ(h.len, sizeof(h) + 11);
  EXPECT_EQ(h.error, 0);
  EXPECT_EQ(h.unique, 99u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf) + sizeof(h), 11),
            "hello world");
  std::memcpy(&h, buf + sizeof(h) + 11, sizeof(h));
  EXPECT_EQ(h.len, sizeof(h));  // errors carry no body
  EXPECT_EQ(h.error, -ENOENT);
  EXPECT_EQ(h.unique, 100u);
  ::close(p[0]);
  ::close(p[1]);
  ::close(efd);
}

}  // namespace
}  // namespace stripefs::fuse

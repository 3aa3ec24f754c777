#include "fuse/replier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "fuse/dev_transport.h"
#include "fuse/request_parser.h"
#include "tests/fuse/wire_builder.h"
#include "tests/support/eventually.h"
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

// A file system stand-in that keeps every WRITE's request buffer it can
// (as StripeFs does for whole stripes) and answers at once.
class KeepingSink : public RequestSink {
 public:
  struct Kept {
    uint64_t unique = 0;
    std::span<const uint8_t> data;  // into the request buffer
    BufferPool::Lease lease;        // empty: the transport refused
  };
  DevTransport* t = nullptr;

  void Dispatch(InFlight* f, const fuse_in_header&, std::span<const uint8_t>,
                std::span<const uint8_t>) override {
    ADD_FAILURE() << "the dev transport hands whole buffers";
    f->Complete(EIO, {});
  }
  void DispatchDevBuffer(InFlight* f, std::span<const uint8_t> buf) override {
    ParseResult pr = ParseDevBuffer(buf, {});
    f->ctx.unique = pr.req.header.unique;
    Replier r(f, nullptr);
    Kept k;
    k.unique = pr.req.header.unique;
    k.data = pr.req.data;
    k.lease = r.KeepRequestBuffer();
    const size_t out = t->buffers_out();
    r.Written(static_cast<uint32_t>(pr.req.data.size()));
    std::lock_guard<std::mutex> lock(mu);
    max_out = std::max(max_out, out);
    kept.push_back(std::move(k));
    cv.notify_all();
  }
  void TransportEnded(std::string_view, Status) override {}

  std::mutex mu;
  std::condition_variable cv;
  std::vector<Kept> kept;  // guarded by mu
  size_t max_out = 0;      // guarded by mu
};

// Sends one WRITE of `data` on the test's end of the "device" and waits
// for its reply.
void SendWrite(int fd, uint64_t unique, const std::vector<uint8_t>& data) {
  fuse_write_in in{};
  in.size = static_cast<uint32_t>(data.size());
  in.offset = unique * data.size();
  auto req = testing::WireRequest(FUSE_WRITE, unique, 2)
                 .Struct(in)
                 .Bytes(std::string_view(
                     reinterpret_cast<const char*>(data.data()), data.size()))
                 .Build();
  ASSERT_EQ(::write(fd, req.data(), req.size()),
            static_cast<ssize_t>(req.size()));
  uint8_t reply[256];
  ssize_t n = ::read(fd, reply, sizeof(reply));
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(fuse_out_header) +
                                    sizeof(fuse_write_out)));
  fuse_out_header h;
  std::memcpy(&h, reply, sizeof(h));
  EXPECT_EQ(h.unique, unique);
  EXPECT_EQ(h.error, 0);
}

// A kept request buffer is never reused by the engine while the file
// system holds it (every kept payload still holds the bytes sent, after
// later requests were read), WRITE payloads are page-aligned, and keeps are
// refused (the caller copies) once the bound of buffers out is reached;
// releasing kept buffers makes room again.
TEST(DevKeep, KeptBuffersAreNotReusedAndTheirNumberIsBounded) {
  int sp[2];
  // SEQPACKET: one read() = one request, like /dev/fuse.
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
  int efd = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  constexpr size_t kData = 32 * 1024;
  DevTransportOptions o;
  o.threads = 2;
  o.buffer_size = kData + 4096;
  o.max_kept_buffers = 3;
  DevTransport t(sp[1], efd, o);
  KeepingSink sink;
  sink.t = &t;
  ASSERT_TRUE(t.Start(&sink).ok());
  constexpr int kWrites = 10;
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < kWrites; ++i) {
    std::vector<uint8_t> d(kData);
    for (size_t j = 0; j < d.size(); ++j)
      d[j] = static_cast<uint8_t>(i * 31 + j * 7 + (j >> 9));
    sent.push_back(d);
    // One request at a time, sent only once both workers are parked in
    // read() with a buffer each: otherwise a worker still between two
    // leases is not counted, and a keep that races it is granted one over
    // max_kept_buffers (allowed by the bound checked below, but it makes
    // the number of grants timing-dependent).
    size_t granted_so_far = 0;
    {
      std::lock_guard<std::mutex> lock(sink.mu);
      for (const auto& k : sink.kept) granted_so_far += !k.lease.empty();
    }
    ASSERT_TRUE(stripefs::testing::Eventually([&] {
      return t.buffers_out() == static_cast<size_t>(o.threads) + granted_so_far;
    })) << "workers did not park: "
        << t.buffers_out() << " buffers out";
    SendWrite(sp[0], static_cast<uint64_t>(i) + 1, d);
    std::unique_lock<std::mutex> lock(sink.mu);
    sink.cv.wait(lock, [&] { return sink.kept.size() == sent.size(); });
  }
  {
    std::unique_lock<std::mutex> lock(sink.mu);
    sink.cv.wait(lock, [&] { return sink.kept.size() == kWrites; });
  }
  size_t granted = 0;
  for (const auto& k : sink.kept) {
    ASSERT_GE(k.unique, 1u);
    const auto& want = sent[k.unique - 1];
    EXPECT_EQ(reinterpret_cast<uintptr_t>(k.data.data()) % 4096, 0u)
        << "WRITE " << k.unique << " payload not page-aligned";
    if (k.lease.empty()) continue;
    ++granted;
    ASSERT_EQ(k.data.size(), want.size());
    EXPECT_EQ(std::memcmp(k.data.data(), want.data(), want.size()), 0)
        << "kept WRITE " << k.unique << " was overwritten";
  }
  // threads + max_kept buffers out at most: the two workers' buffers, one
  // of them the request being kept, so max_kept keeps (requests go one at
  // a time, each to parked workers).
  EXPECT_EQ(granted, o.max_kept_buffers);
  EXPECT_EQ(t.kept(), o.max_kept_buffers);
  EXPECT_EQ(t.keep_refused(), kWrites - o.max_kept_buffers);
  EXPECT_LE(sink.max_out, static_cast<size_t>(o.threads) + o.max_kept_buffers);
  // Released kept buffers go back to the pool: keeping works again.
  {
    std::lock_guard<std::mutex> lock(sink.mu);
    for (auto& k : sink.kept) k.lease.reset();
    sink.kept.clear();
  }
  SendWrite(sp[0], 1, sent[0]);
  {
    std::unique_lock<std::mutex> lock(sink.mu);
    sink.cv.wait(lock, [&] { return sink.kept.size() == 1; });
    EXPECT_FALSE(sink.kept[0].lease.empty());
    EXPECT_EQ(std::memcmp(sink.kept[0].data.data(), sent[0].data(), kData), 0);
    sink.kept.clear();
  }
  t.Stop();
  t.Join();
  EXPECT_EQ(t.buffers_out(), 0u);
  ::close(sp[0]);
  ::close(sp[1]);
  ::close(efd);
}

}  // namespace
}  // namespace stripefs::fuse

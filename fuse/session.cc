#include "fuse/session.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>

#include "fuse/compound.h"
#include "fuse/dev_transport.h"
#include "fuse/init_negotiation.h"
#include "fuse/kernel_knobs.h"
#include "fuse/opcode_table.h"
#include "fuse/rate_limited_log.h"
#include "fuse/uring_transport.h"

namespace stripefs::fuse {

using namespace fuse_abi;  // NOLINT

Result<TransportChoice> ParseTransportChoice(std::string_view s) {
  if (s == "auto") return TransportChoice::kAuto;
  if (s == "dev") return TransportChoice::kDev;
  if (s == "uring" || s == "io_uring" || s == "io-uring")
    return TransportChoice::kUring;
  return Status::InvalidArgument("unknown transport '" + std::string(s) +
                                 "'; use auto, dev or uring");
}

std::string_view TransportChoiceName(TransportChoice c) {
  switch (c) {
    case TransportChoice::kAuto:
      return "auto";
    case TransportChoice::kDev:
      return "dev";
    case TransportChoice::kUring:
      return "uring";
  }
  return "?";
}

bool ShouldUseUring(TransportChoice c, bool kernel_offers_uring) {
  return c != TransportChoice::kDev && kernel_offers_uring;
}

UringQueuePlan PlanUringQueues(int cpus, int requested, bool reduced_offered) {
  cpus = std::max(cpus, 1);
  if (requested <= 0 || requested >= cpus) return {cpus, {}};
  const std::string n = std::to_string(requested);
  const std::string c = std::to_string(cpus);
  if (!reduced_offered) {
    return {cpus, "--uring-queues " + n +
                      " ignored: this kernel cannot serve fewer io-uring "
                      "queues than CPUs (needs the stripefs fuse.ko patch 7); "
                      "using one per CPU (" +
                      c + ")"};
  }
  return {requested, "io-uring with " + n + " of " + c +
                         " queues: the kernel offered FUSE_URING_REDUCED_Q "
                         "and maps the other CPUs onto them"};
}

namespace {

constexpr int kShards = 16;

struct QueueCounter {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> foreground{0};
  std::atomic<uint64_t> background{0};
  std::unique_ptr<std::atomic<uint64_t>[]> per_cpu;
};

}  // namespace

// Impl is what request handlers (opcode_table.h) and Repliers talk back to.
struct Session::Impl final : OpEngine, ReplyObserver {
  Session* self = nullptr;
  RawFileSystem* fs;
  SessionOptions opts;
  int fuse_fd = -1;
  int stop_fd = -1;
  int ncpu = 1;
  ParseOptions parse_opts;
  RateLimitedLog log;

  mutable std::mutex mu;
  std::condition_variable cv;
  NegotiatedInit neg;
  bool init_done = false;
  bool ended = false;
  bool joined = false;
  Status end_status;
  std::string transport = "dev";

  std::unique_ptr<DevTransport> dev;
  std::unique_ptr<UringTransport> uring;
  std::atomic<bool> destroyed{false};

  std::array<std::atomic<uint64_t>, kOpcodeLimit> per_opcode{};
  std::atomic<uint64_t> unknown{0}, malformed{0}, interrupts{0};
  std::vector<std::unique_ptr<QueueCounter>> queues;  // dev..., uring...
  int uring_base = 0;
  int uring_queues = 0;

  struct Shard {
    std::mutex mu;
    std::unordered_map<uint64_t, InFlight*> map;
  };
  Shard shards[kShards];
  Shard& ShardOf(uint64_t unique) { return shards[(unique >> 1) % kShards]; }

  void CallDestroy() {
    if (!destroyed.exchange(true)) fs->Destroy();
  }

  // ---- OpEngine ----
  Replier Track(InFlight* f) override;
  void Init(InFlight* f, const ParsedRequest& q) override {
    self->HandleInit(f, q);
  }
  void Interrupt(InFlight* f, uint64_t target) override;
  void Destroy(InFlight* f) override {
    CallDestroy();
    f->Complete(0, {});
  }
  void Compound(InFlight* f, const ParsedRequest& q) override;
  void DispatchSub(InFlight* sub, const CompoundSubRequest& s);
  // ---- ReplyObserver ----
  void OnReply(InFlight* f) override;
};

Replier Session::Impl::Track(InFlight* f) {
  {
    auto& sh = ShardOf(f->ctx.unique);
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.map[f->ctx.unique] = f;
  }
  // A retried request keeps the time of its first dispatch.
  if (opts.request_observer && !f->ctx.retried)
    f->tracked_at = std::chrono::steady_clock::now();
  return Replier(f, this);
}

void Session::Impl::OnReply(InFlight* f) {
  if (opts.request_observer) {
    opts.request_observer->OnRequestDone(
        f->ctx.opcode, std::chrono::steady_clock::now() - f->tracked_at);
  }
  auto& sh = ShardOf(f->ctx.unique);
  std::lock_guard<std::mutex> lock(sh.mu);
  auto it = sh.map.find(f->ctx.unique);
  if (it != sh.map.end() && it->second == f) sh.map.erase(it);
}

namespace {

// What handlers of sub-requests talk back to: their replies go to the
// compound (untracked: an INTERRUPT names the compound, not its parts).
// The engine opcodes never reach it (AllowedInCompound refuses them).
class SubRequestEngine final : public OpEngine {
 public:
  Replier Track(InFlight* f) override { return Replier(f, nullptr); }
  void Init(InFlight* f, const ParsedRequest&) override { f->Complete(EIO, {}); }
  void Interrupt(InFlight* f, uint64_t) override { f->Complete(EIO, {}); }
  void Destroy(InFlight* f) override { f->Complete(EIO, {}); }
  void Compound(InFlight* f, const ParsedRequest&) override {
    f->Complete(EIO, {});
  }
};
SubRequestEngine sub_request_engine;

}  // namespace

void Session::Impl::Compound(InFlight* f, const ParsedRequest& q) {
  Replier parent = Track(f);
  if (opts.refuse_compound) {
    parent.Error(ENOSYS);
    return;
  }
  // Sub-requests may wait (metadata, disk): not on an io-uring queue thread.
  if (f->ctx.must_not_block) {
    parent.WouldBlock();
    return;
  }
  CompoundDecode d = DecodeCompound(
      std::span<const uint8_t>(q.in, q.in_size), q.data, parse_opts);
  if (d.error != 0) {
    malformed.fetch_add(1, std::memory_order_relaxed);
    log.Log("malformed request: " + d.reason);
    parent.Error(d.error);
    return;
  }
  const RequestContext base = f->ctx;
  RunCompound(std::move(parent), base, std::move(d),
              [this](InFlight* sub, const CompoundSubRequest& s) {
                DispatchSub(sub, s);
              });
}

void Session::Impl::DispatchSub(InFlight* sub, const CompoundSubRequest& s) {
  ParseResult pr = ParseRequest(s.header, s.arg0, s.rest, parse_opts);
  if (pr.error != 0) {
    malformed.fetch_add(1, std::memory_order_relaxed);
    log.Log("malformed request in a compound: " + pr.reason);
    sub->Complete(pr.error, {});
    return;
  }
  per_opcode[s.header.opcode].fetch_add(1, std::memory_order_relaxed);
  const OpcodeRow& row = *FindOpcode(s.header.opcode);  // decoded, so known
  row.handler(OpCall{pr.req, *fs, sub_request_engine, sub});
}

void Session::Impl::Interrupt(InFlight* f, uint64_t target) {
  interrupts.fetch_add(1, std::memory_order_relaxed);
  bool found = false;
  {
    auto& sh = ShardOf(target);
    std::lock_guard<std::mutex> lock(sh.mu);
    auto it = sh.map.find(target);
    if (it != sh.map.end()) {
      it->second->interrupted.store(true);
      found = true;
    }
  }
  if (found) {
    fs->Interrupt(target);
    f->Complete(kNoReply, {});
  } else {
    // Not (yet) seen: the kernel re-queues the interrupt on EAGAIN and
    // drops it once the original request was answered.
    f->Complete(EAGAIN, {});
  }
}

Session::Session(RawFileSystem* fs, SessionOptions opts)
    : impl_(std::make_unique<Impl>()) {
  impl_->self = this;
  impl_->fs = fs;
  impl_->opts = opts;
  if (impl_->opts.dev_threads < 1) impl_->opts.dev_threads = 1;
  if (impl_->opts.uring_queue_depth < 1) impl_->opts.uring_queue_depth = 1;
  impl_->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  impl_->ncpu = PossibleCpuCount();
  int nq = impl_->opts.dev_threads + impl_->ncpu;
  impl_->uring_base = impl_->opts.dev_threads;
  for (int i = 0; i < nq; ++i) {
    auto q = std::make_unique<QueueCounter>();
    q->per_cpu.reset(new std::atomic<uint64_t>[impl_->ncpu]);
    for (int c = 0; c < impl_->ncpu; ++c) q->per_cpu[c].store(0);
    impl_->queues.push_back(std::move(q));
  }
}

Session::~Session() {
  Stop();
  (void)Wait();
  if (impl_->stop_fd >= 0) ::close(impl_->stop_fd);
}

Status Session::Start(int fuse_fd) {
  if (impl_->stop_fd < 0) {
    return Status::FromErrno(errno, "eventfd for the session stop signal");
  }
  if (fuse_fd < 0) return Status::InvalidArgument("invalid /dev/fuse fd");
  impl_->fuse_fd = fuse_fd;
  const InitOptions& io = impl_->opts.init;
  size_t max_req =
      std::max<size_t>(io.max_write, static_cast<size_t>(io.max_pages) * 4096);
  DevTransportOptions d;
  d.threads = impl_->opts.dev_threads;
  d.wait = impl_->opts.dev_poll ? DevWait::kPoll : DevWait::kBlockingRead;
  d.buffer_size = std::max<size_t>(kMinReadBuffer, max_req + 4096);
  d.first_queue = 0;
  impl_->dev = std::make_unique<DevTransport>(fuse_fd, impl_->stop_fd, d);
  return impl_->dev->Start(this);
}

void Session::Stop() {
  uint64_t one = 1;
  if (impl_ && impl_->stop_fd >= 0) {
    [[maybe_unused]] ssize_t r = ::write(impl_->stop_fd, &one, sizeof(one));
  }
}

Status Session::Wait() {
  Impl& m = *impl_;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    if (m.joined) return m.end_status;
    if (m.dev) m.cv.wait(lock, [&] { return m.ended; });
  }
  // Dev workers are done; make sure io-uring queues stop as well.
  Stop();
  if (m.dev) m.dev->Join();
  std::unique_ptr<UringTransport> uring;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    uring = std::move(m.uring);
  }
  if (uring) {
    uring->Stop();
    uring->Join();
  }
  if (initialized_.load()) m.CallDestroy();
  std::lock_guard<std::mutex> lock(m.mu);
  m.joined = true;
  return m.end_status;
}

bool Session::WaitForInit(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait_for(lock, timeout,
                     [&] { return impl_->init_done || impl_->ended; });
  return impl_->init_done;
}

NegotiatedInit Session::negotiated() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->neg;
}

std::string Session::active_transport() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->transport;
}

EngineStats Session::Stats() const {
  const Impl& m = *impl_;
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    s.initialized = m.init_done;
    s.negotiated = m.neg;
    s.transport = m.transport;
    s.uring_queues = static_cast<uint32_t>(m.uring_queues);
    s.uring_depth = m.uring_queues ? m.opts.uring_queue_depth : 0;
    if (m.uring) {
      s.uring_reads_inline = m.uring->reads_inline();
      s.uring_reads_handed = m.uring->reads_handed();
      s.uring_read_tries = m.uring->read_tries();
      s.uring_read_would_block = m.uring->read_would_block();
    }
  }
  for (uint32_t i = 0; i < kOpcodeLimit; ++i)
    s.per_opcode[i] = m.per_opcode[i].load();
  s.unknown_opcode = m.unknown.load();
  s.malformed = m.malformed.load();
  s.interrupts = m.interrupts.load();
  s.reply_enoent = m.dev ? m.dev->reply_enoent().load() : 0;
  s.dev_empty_wakes = m.dev ? m.dev->empty_wakes() : 0;
  s.dev_worker_sleeps = m.dev ? m.dev->worker_sleeps() : 0;
  if (m.dev) {
    s.dev_wait = m.dev->wait_mode() == DevWait::kPoll ? "poll" : "read";
  }
  int ndev = m.opts.dev_threads;
  for (int i = 0; i < ndev + static_cast<int>(s.uring_queues); ++i) {
    const QueueCounter& q = *m.queues[i];
    QueueStats qs;
    qs.transport = i < ndev ? "dev" : "uring";
    qs.queue = i < ndev ? i : i - ndev;
    qs.requests = q.requests.load();
    qs.foreground = q.foreground.load();
    qs.background = q.background.load();
    for (int c = 0; c < m.ncpu; ++c) qs.per_cpu.push_back(q.per_cpu[c].load());
    s.queues.push_back(std::move(qs));
  }
  return s;
}

namespace {

// Writes one notification: `st`, then `tail` (a name, NUL-terminated when
// `nul`, or file data).
Status WriteNotify(int fd, int32_t code, const void* st, size_t st_len,
                   std::span<const uint8_t> tail, bool nul) {
  if (fd < 0) return Status::InvalidArgument("session not started");
  fuse_out_header oh{};
  oh.error = code;
  oh.unique = 0;
  char zero = 0;
  iovec iov[4] = {{&oh, sizeof(oh)},
                  {const_cast<void*>(st), st_len},
                  {const_cast<uint8_t*>(tail.data()), tail.size()},
                  {&zero, 1}};
  const int n = nul ? 4 : 3;
  oh.len =
      static_cast<uint32_t>(sizeof(oh) + st_len + tail.size() + (nul ? 1 : 0));
  for (;;) {
    ssize_t w = ::writev(fd, iov, n);
    if (w >= 0) return Status::Ok();
    if (errno == EINTR) continue;
    return Status::FromErrno(errno,
                             "FUSE notification " + std::to_string(code));
  }
}

std::span<const uint8_t> NameBytes(std::string_view name) {
  return {reinterpret_cast<const uint8_t*>(name.data()), name.size()};
}

}  // namespace

Status Session::NotifyInvalInode(uint64_t ino, int64_t off, int64_t len) {
  fuse_notify_inval_inode_out o{ino, off, len};
  return WriteNotify(impl_->fuse_fd, FUSE_NOTIFY_INVAL_INODE, &o, sizeof(o), {},
                     false);
}

Status Session::NotifyStore(uint64_t ino, uint64_t offset,
                            std::span<const uint8_t> data) {
  fuse_notify_store_out o{ino, offset, static_cast<uint32_t>(data.size()), 0};
  return WriteNotify(impl_->fuse_fd, FUSE_NOTIFY_STORE, &o, sizeof(o), data,
                     false);
}

Status Session::NotifyInvalEntry(uint64_t parent, std::string_view name) {
  fuse_notify_inval_entry_out o{parent, static_cast<uint32_t>(name.size()), 0};
  return WriteNotify(impl_->fuse_fd, FUSE_NOTIFY_INVAL_ENTRY, &o, sizeof(o),
                     NameBytes(name), true);
}

Status Session::NotifyDelete(uint64_t parent, uint64_t child,
                             std::string_view name) {
  fuse_notify_delete_out o{parent, child, static_cast<uint32_t>(name.size()),
                           0};
  return WriteNotify(impl_->fuse_fd, FUSE_NOTIFY_DELETE, &o, sizeof(o),
                     NameBytes(name), true);
}

void Session::TransportEnded(std::string_view transport, Status why) {
  Impl& m = *impl_;
  if (!why.ok()) {
    std::fprintf(stderr, "stripefs-fuse: %s transport ended: %s\n",
                 std::string(transport).c_str(), why.ToString().c_str());
  }
  if (transport == "dev") {
    {
      std::lock_guard<std::mutex> lock(m.mu);
      m.ended = true;
      if (m.end_status.ok()) m.end_status = why;
    }
    Stop();
    m.cv.notify_all();
  }
}

void Session::DispatchDevBuffer(InFlight* f, std::span<const uint8_t> buf) {
  Impl& m = *impl_;
  SplitResult sp = SplitDevBuffer(buf, m.parse_opts);
  if (sp.error != 0) {
    m.malformed.fetch_add(1, std::memory_order_relaxed);
    m.log.Log("malformed request: " + sp.reason);
    f->ctx.unique = sp.raw.header.unique;
    f->ctx.opcode = sp.raw.header.opcode;
    // Reply EINVAL if we could read a unique that expects a reply.
    bool reply = buf.size() >= sizeof(fuse_in_header) &&
                 !IsNoReplyOpcode(sp.raw.header.opcode);
    f->Complete(reply ? EINVAL : kNoReply, {});
    return;
  }
  Dispatch(f, sp.raw.header, sp.raw.arg0, sp.raw.rest);
}

void Session::Dispatch(InFlight* f, const fuse_in_header& h,
                       std::span<const uint8_t> arg0,
                       std::span<const uint8_t> rest) {
  Impl& m = *impl_;
  RequestContext& c = f->ctx;
  c.SetFromHeader(h);
  if (c.cpu < 0) c.cpu = sched_getcpu();

  int qidx = c.uring ? m.uring_base + c.queue : c.queue;
  QueueCounter* qc = (qidx >= 0 && qidx < static_cast<int>(m.queues.size()))
                         ? m.queues[qidx].get()
                         : nullptr;
  // A request given back (Replier::WouldBlock) and dispatched again is
  // counted once.
  if (c.retried) qc = nullptr;
  if (qc) {
    qc->requests.fetch_add(1, std::memory_order_relaxed);
    if (c.cpu >= 0 && c.cpu < m.ncpu)
      qc->per_cpu[c.cpu].fetch_add(1, std::memory_order_relaxed);
  }

  ParseResult pr = ParseRequest(h, arg0, rest, m.parse_opts);
  if (pr.error != 0) {
    if (pr.error == ENOSYS) {
      m.unknown.fetch_add(1, std::memory_order_relaxed);
      m.log.Log("unsupported request: " + pr.reason);
    } else {
      m.malformed.fetch_add(1, std::memory_order_relaxed);
      m.log.Log("malformed request: " + pr.reason);
    }
    if (qc) qc->foreground.fetch_add(1, std::memory_order_relaxed);
    f->Complete(IsNoReplyOpcode(h.opcode) ? kNoReply : pr.error, {});
    return;
  }
  const ParsedRequest& q = pr.req;
  if (!c.retried)
    m.per_opcode[h.opcode].fetch_add(1, std::memory_order_relaxed);
  if (h.opcode == FUSE_WRITE &&
      (q.In<fuse_write_in>().write_flags & FUSE_WRITE_CACHE)) {
    c.background = true;
  }
  if (qc) {
    (c.background ? qc->background : qc->foreground)
        .fetch_add(1, std::memory_order_relaxed);
  }
  if (m.opts.log_requests) {
    std::fprintf(stderr,
                 "stripefs-fuse: %s unique=%llu node=%llu q=%d cpu=%d\n",
                 std::string(OpcodeName(h.opcode)).c_str(),
                 static_cast<unsigned long long>(h.unique),
                 static_cast<unsigned long long>(h.nodeid), c.queue, c.cpu);
  }

  const OpcodeRow& row = *FindOpcode(h.opcode);  // parsed, so known
  if (!row.before_init && !initialized_.load()) {
    m.log.Log("request before INIT: " + std::string(row.name));
    f->Complete(row.reply == ReplyRule::kNever ? kNoReply : EIO, {});
    return;
  }
  row.handler(OpCall{q, *m.fs, m, f});
}

namespace {

// Pages per request asked for in the INIT reply (io-uring payload buffers
// are sized for it).
uint32_t RequestedMaxPages(const InitOptions& o) {
  return std::min<uint32_t>(std::max<uint32_t>(o.max_pages, 1), 65535);
}

uint32_t EffectiveMaxPagesLimit() {
  auto v = ReadKnob(kMaxPagesLimitPath);
  if (!v.ok()) return 256;
  return static_cast<uint32_t>(std::strtoul(v->c_str(), nullptr, 10));
}

}  // namespace

void Session::HandleInit(InFlight* f, const ParsedRequest& q) {
  Impl& m = *impl_;
  fuse_init_in in{};
  std::memcpy(&in, q.in, std::min<size_t>(q.in_size, sizeof(in)));
  InitConfig config;
  config.init = m.opts.init;
  config.want_uring = m.opts.transport != TransportChoice::kDev;
  config.max_pages_limit = EffectiveMaxPagesLimit();
  InitNegotiation neg = NegotiateInit(in, config);
  if (neg.error != 0) {
    m.log.Log(neg.refusal);
    f->Complete(neg.error, {});
    return;
  }
  const NegotiatedInit& n = neg.report;
  // The kernel sends nothing else before our INIT reply.
  m.parse_opts.setxattr_ext = n.Has(FUSE_SETXATTR_EXT);
  m.fs->Init(n);
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.neg = n;
  }
  initialized_.store(true);
  iovec v{neg.reply.data(), neg.reply.size()};
  f->Complete(0, {&v, 1});
  StartUringAfterInit(n);
}

void Session::StartUringAfterInit(const NegotiatedInit& n) {
  Impl& m = *impl_;
  bool use_uring = ShouldUseUring(m.opts.transport, n.uring_offered);
  if (m.opts.transport == TransportChoice::kUring && !n.uring_offered) {
    m.log.Log(std::string("io-uring transport requested but the kernel did "
                          "not offer FUSE_OVER_IO_URING (") +
              (UringKnobPresent()
                   ? "enable it: echo Y > " + std::string(kEnableUringPath)
                   : std::string("kernel lacks "
                                 "CONFIG_FUSE_IO_URING")) +
              "); using /dev/fuse");
  }
  if (use_uring) {
    UringTransportOptions uo;
    const UringQueuePlan plan = PlanUringQueues(
        m.ncpu, m.opts.uring_queues, n.Offered(FUSE_URING_REDUCED_Q));
    if (!plan.message.empty()) m.log.Log(plan.message);
    uo.queues = plan.queues;
    uo.depth = m.opts.uring_queue_depth;
    uo.read_workers = std::max(0, m.opts.uring_read_workers);
    uo.inline_lone_reads = m.opts.uring_inline_lone_reads;
    uo.try_reads = m.opts.uring_try_reads;
    uo.payload_size = std::max<size_t>(
        {kMinReadBuffer, static_cast<size_t>(n.max_write),
         static_cast<size_t>(RequestedMaxPages(m.opts.init)) * 4096});
    uo.pin_threads = m.opts.uring_pin_threads;
    uo.first_queue = 0;
    uo.parse = m.parse_opts;
    auto t = std::make_unique<UringTransport>(m.fuse_fd, m.stop_fd, uo);
    Status st = t->Start(this);
    if (!st.ok()) {
      m.log.Log("io-uring transport failed to start, staying on /dev/fuse: " +
                st.ToString());
      t->Stop();
      t->Join();
    } else {
      std::lock_guard<std::mutex> lock(m.mu);
      m.uring = std::move(t);
      m.uring_queues = uo.queues;
      m.transport = "uring";
    }
  }
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.init_done = true;
  }
  m.cv.notify_all();
}

}  // namespace stripefs::fuse

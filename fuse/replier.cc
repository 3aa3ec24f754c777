#include "fuse/replier.h"

#include <cerrno>
#include <cstdio>

namespace stripefs::fuse {

using namespace fuse_abi;  // NOLINT

namespace {
const RequestContext kNoContext{};

iovec Iov(const void* p, size_t n) { return iovec{const_cast<void*>(p), n}; }
}  // namespace

Replier& Replier::operator=(Replier&& o) noexcept {
  if (this != &o) {
    if (inflight_) Error(EIO);
    inflight_ = o.inflight_;
    observer_ = o.observer_;
    o.inflight_ = nullptr;
    o.observer_ = nullptr;
  }
  return *this;
}

Replier::~Replier() {
  if (inflight_) {
    std::fprintf(stderr,
                 "stripefs-fuse: request unique=%llu opcode=%u dropped "
                 "without a reply; answering EIO\n",
                 static_cast<unsigned long long>(inflight_->ctx.unique),
                 inflight_->ctx.opcode);
    Error(EIO);
  }
}

const RequestContext& Replier::ctx() const {
  return inflight_ ? inflight_->ctx : kNoContext;
}

bool Replier::interrupted() const {
  return inflight_ && inflight_->interrupted.load(std::memory_order_relaxed);
}

void InFlight::GiveBack() {
  std::fprintf(stderr,
               "stripefs-fuse: request unique=%llu opcode=%u given back by a "
               "transport that cannot re-dispatch it; answering EIO\n",
               static_cast<unsigned long long>(ctx.unique), ctx.opcode);
  Complete(EIO, {});
}

void Replier::WouldBlock() {
  InFlight* f = inflight_;
  if (!f) return;
  if (!f->ctx.must_not_block) {
    std::fprintf(stderr,
                 "stripefs-fuse: request unique=%llu opcode=%u answered "
                 "WouldBlock though it may block; answering EIO\n",
                 static_cast<unsigned long long>(f->ctx.unique), f->ctx.opcode);
    Error(EIO);
    return;
  }
  // Still in flight: the observer (the Session's INTERRUPT tracking) keeps
  // it until the retried request replies.
  inflight_ = nullptr;
  observer_ = nullptr;
  f->GiveBack();
}

void Replier::Send(int error, std::span<const iovec> iov) {
  InFlight* f = inflight_;
  if (!f) return;
  inflight_ = nullptr;
  if (observer_) observer_->OnReply(f);
  observer_ = nullptr;
  f->Complete(error, iov);
}

void Replier::Error(int err) {
  if (err < 0) err = -err;
  Send(err, {});
}

void Replier::Entry(const fuse_entry_out& e) {
  iovec v = Iov(&e, sizeof(e));
  Send(0, {&v, 1});
}

void Replier::Attr(const fuse_attr_out& a) {
  iovec v = Iov(&a, sizeof(a));
  Send(0, {&v, 1});
}

void Replier::Open(const fuse_open_out& o) {
  iovec v = Iov(&o, sizeof(o));
  Send(0, {&v, 1});
}

void Replier::Create(const fuse_entry_out& e, const fuse_open_out& o) {
  iovec v[2] = {Iov(&e, sizeof(e)), Iov(&o, sizeof(o))};
  Send(0, v);
}

void Replier::Written(uint32_t size) {
  fuse_write_out w{size, 0};
  iovec v = Iov(&w, sizeof(w));
  Send(0, {&v, 1});
}

void Replier::Statfs(const fuse_kstatfs& st) {
  fuse_statfs_out s{st};
  iovec v = Iov(&s, sizeof(s));
  Send(0, {&v, 1});
}

void Replier::XattrSize(uint32_t size) {
  fuse_getxattr_out g{size, 0};
  iovec v = Iov(&g, sizeof(g));
  Send(0, {&v, 1});
}

void Replier::Lseek(uint64_t offset) {
  fuse_lseek_out l{offset};
  iovec v = Iov(&l, sizeof(l));
  Send(0, {&v, 1});
}

void Replier::CopyFileRange(uint64_t bytes) {
  if (ctx().opcode == FUSE_COPY_FILE_RANGE_64) {
    fuse_copy_file_range_out c{bytes};
    iovec v = Iov(&c, sizeof(c));
    Send(0, {&v, 1});
  } else {
    fuse_write_out w{
        static_cast<uint32_t>(bytes > UINT32_MAX ? UINT32_MAX : bytes), 0};
    iovec v = Iov(&w, sizeof(w));
    Send(0, {&v, 1});
  }
}

void Replier::Data(std::span<const uint8_t> bytes) {
  iovec v = Iov(bytes.data(), bytes.size());
  Send(0, {&v, bytes.empty() ? 0u : 1u});
}

void Replier::DataV(std::span<const iovec> iov) { Send(0, iov); }

std::span<uint8_t> Replier::ReplyBuffer(size_t n) {
  if (!inflight_) return {};
  return inflight_->ScratchBuffer(n);
}

BufferPool::Lease Replier::KeepRequestBuffer() {
  if (!inflight_) return {};
  return inflight_->KeepRequestBuffer();
}

}  // namespace stripefs::fuse

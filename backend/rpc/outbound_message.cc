#include "backend/rpc/outbound_message.h"

namespace stripefs::rpc {

std::unique_ptr<OutboundMessage> OutboundMessage::Reject(FrameError why) {
  auto m = std::make_unique<OutboundMessage>();
  FrameHeader h;
  h.flags = kFlagReject;
  h.type = static_cast<uint16_t>(why);
  EncodeHeader(h, m->seal.header);  // tag of a reject frame: zero, unchecked
  m->BuildIov();
  return m;
}

std::unique_ptr<OutboundMessage> OutboundMessage::Raw(
    std::span<const uint8_t> bytes) {
  auto m = std::make_unique<OutboundMessage>();
  m->raw = true;
  m->reply.payload.assign(bytes.begin(), bytes.end());
  m->BuildIov();
  return m;
}

void OutboundMessage::BuildIov() {
  iovcnt_ = 0;
  first_ = 0;
  if (raw) {
    iov_[iovcnt_++] = {reply.payload.data(), reply.payload.size()};
    return;
  }
  iov_[iovcnt_++] = {seal.header, kFrameHeaderSize};
  if (seal.encrypted) {
    if (!seal.body.empty())
      iov_[iovcnt_++] = {const_cast<uint8_t*>(seal.body.data()),
                         seal.body.size()};
    iov_[iovcnt_++] = {seal.tag.data(), seal.tag.size()};
    return;
  }
  if (!reply.payload.empty())
    iov_[iovcnt_++] = {reply.payload.data(), reply.payload.size()};
  if (!reply.bulk.empty())
    iov_[iovcnt_++] = {const_cast<uint8_t*>(reply.bulk.data()),
                       reply.bulk.size()};
  iov_[iovcnt_++] = {seal.tag.data(), seal.tag.size()};
}

msghdr* OutboundMessage::Unsent() {
  msg_ = msghdr{};
  msg_.msg_iov = iov_ + first_;
  msg_.msg_iovlen = static_cast<size_t>(iovcnt_ - first_);
  return &msg_;
}

bool OutboundMessage::Advance(size_t n) {
  while (first_ < iovcnt_ && n >= iov_[first_].iov_len) {
    n -= iov_[first_].iov_len;
    ++first_;
  }
  if (first_ == iovcnt_) return true;
  iov_[first_].iov_base = static_cast<uint8_t*>(iov_[first_].iov_base) + n;
  iov_[first_].iov_len -= n;
  return false;
}

}  // namespace stripefs::rpc

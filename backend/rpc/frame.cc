#include "backend/rpc/frame.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "common/coding.h"

namespace stripefs::rpc {
namespace {

Status Err(FrameError e, std::string msg);
Result<Frame> ReadFrameBody(int fd, FrameCipher& cipher,
                            const uint8_t header[kFrameHeaderSize], Frame f,
                            Deadline deadline);

int CodeOf(FrameError e) {
  switch (e) {
    case FrameError::kNone:
      return 0;
    case FrameError::kBadMagic:
      return EPROTO;
    case FrameError::kBadVersion:
      return EPROTONOSUPPORT;
    case FrameError::kOversize:
      return EMSGSIZE;
    case FrameError::kTruncated:
      return ECONNRESET;
    case FrameError::kBadMac:
      return EACCES;
    case FrameError::kBadHandshake:
      return EKEYREJECTED;
    case FrameError::kCleartext:
      return EPERM;
  }
  return EPROTO;
}

Status Err(FrameError e, std::string msg) {
  return Status(CodeOf(e), std::move(msg));
}

int Remaining(Deadline d) {
  if (d == Deadline::max()) return -1;
  auto now = Clock::now();
  if (now >= d) return 0;
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(d - now).count();
  return static_cast<int>(std::min<int64_t>(ms + 1, 1 << 30));
}

// Waits for `events` on fd. OK, ETIMEDOUT, or an errno.
Status WaitFd(int fd, short events, Deadline d) {
  for (;;) {
    pollfd p{fd, events, 0};
    int t = Remaining(d);
    if (t == 0) return Status(ETIMEDOUT, "deadline exceeded");
    int r = ::poll(&p, 1, t);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno(errno, "poll");
    if (r == 0) continue;  // re-check the deadline
    return Status::Ok();
  }
}

// Reads `len` bytes into *out. Up to kEagerBytes the buffer is sized at
// once (received in place, no copy); beyond that it grows as data arrives,
// so an unauthenticated peer cannot make us allocate more than it sends.
constexpr size_t kEagerBytes = 4u << 20;
template <class Bytes>
Status ReadGrowing(int fd, Bytes* out, size_t len, Deadline d) {
  size_t have = 0;
  out->resize(std::min(len, kEagerBytes));
  while (have < len) {
    if (have == out->size()) out->resize(std::min(len, out->size() * 2));
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, out->data() + have, out->size() - have, d, true));
    have = out->size();
  }
  return Status::Ok();
}

}  // namespace

// Reads exactly len bytes. `started` says whether part of the frame was
// already read (EOF then means truncation rather than a clean close).
Status ReadFull(int fd, uint8_t* buf, size_t len, Deadline d, bool started) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = ::recv(fd, buf + got, len - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      started = true;
      continue;
    }
    if (n == 0) {
      if (!started) return Status(ENOTCONN, "connection closed by peer");
      return Err(FrameError::kTruncated,
                 "connection closed mid-frame (truncated frame)");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      STRIPEFS_RETURN_IF_ERROR(WaitFd(fd, POLLIN, d));
      continue;
    }
    return Status::FromErrno(errno, "recv");
  }
  return Status::Ok();
}

namespace {

// Receives into the gather list `iov` until it is full (one recvmsg when
// the socket holds everything). A frame was already under way.
Status RecvAll(int fd, iovec* iov, int iovcnt, Deadline d) {
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n == 0)
      return Err(FrameError::kTruncated,
                 "connection closed mid-frame (truncated frame)");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        STRIPEFS_RETURN_IF_ERROR(WaitFd(fd, POLLIN, d));
        continue;
      }
      return Status::FromErrno(errno, "recv");
    }
    size_t got = static_cast<size_t>(n);
    while (iovcnt > 0 && got >= iov->iov_len) {
      got -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + got;
      iov->iov_len -= got;
    }
  }
  return Status::Ok();
}

}  // namespace

Status SendAll(int fd, iovec* iov, int iovcnt, Deadline d) {
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    // At most IOV_MAX entries per call (a gathered bulk may have more).
    msg.msg_iovlen = static_cast<size_t>(std::min(iovcnt, IOV_MAX));
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        STRIPEFS_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, d));
        continue;
      }
      return Status::FromErrno(errno, "send");
    }
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::Ok();
}

Status VerifyFrame(FrameCipher& cipher, const uint8_t header[kFrameHeaderSize],
                   std::span<uint8_t> payload, std::span<uint8_t> bulk,
                   std::span<const uint8_t> tag) {
  const std::span<const uint8_t> head(header, kFrameHeaderSize);
  if (header[5] & kFlagSecure) {
    std::span<uint8_t> body[] = {payload, bulk};
    return cipher.OpenInPlace(head, body, tag);
  }
  if (cipher.secure()) {
    return Err(FrameError::kCleartext,
               "unencrypted frame refused: this end runs in secure mode "
               "(give every server and client of the cluster --secure, "
               "mounts -o secure)");
  }
  std::span<const uint8_t> parts[] = {head, payload, bulk};
  return cipher.Verify(parts, tag);
}

namespace {

// Frame parts (header, payload, bulk parts) kept on the stack.
constexpr size_t kInlineParts = 8;

size_t BulkSize(BulkParts bulk) {
  size_t n = 0;
  for (std::span<const uint8_t> part : bulk) n += part.size();
  return n;
}

}  // namespace

FrameSeal SealFrame(FrameCipher& cipher, FrameHeader h,
                    std::span<const uint8_t> payload,
                    std::span<const uint8_t> bulk,
                    std::vector<uint8_t>* ciphertext) {
  return SealFrameGather(cipher, h, payload, BulkParts(&bulk, 1), ciphertext);
}

FrameSeal SealFrameGather(FrameCipher& cipher, FrameHeader h,
                          std::span<const uint8_t> payload, BulkParts bulk,
                          std::vector<uint8_t>* ciphertext) {
  FrameSeal seal;
  h.payload_len = static_cast<uint32_t>(payload.size());
  h.bulk_len = static_cast<uint32_t>(BulkSize(bulk));
  if (cipher.secure()) h.flags |= kFlagSecure;
  EncodeHeader(h, seal.header);
  // On the stack for the usual one-part bulk; a batch's parts on the heap.
  std::span<const uint8_t> inline_parts[kInlineParts];
  std::vector<std::span<const uint8_t>> heap_parts;
  std::span<const uint8_t>* parts = inline_parts;
  if (2 + bulk.size() > kInlineParts) {
    heap_parts.resize(2 + bulk.size());
    parts = heap_parts.data();
  }
  parts[0] = std::span<const uint8_t>(seal.header, kFrameHeaderSize);
  parts[1] = payload;
  std::copy(bulk.begin(), bulk.end(), parts + 2);
  if (h.flags & kFlagSecure) {
    // Encrypted into a buffer the sender keeps: the caller's payload and
    // bulk stay as they are (a chunk may be sent again, or cached).
    std::vector<uint8_t>* out = ciphertext ? ciphertext : &cipher.scratch();
    out->resize(payload.size() + h.bulk_len);
    seal.tag = cipher.SealEncrypt(parts[0], {parts + 1, 1 + bulk.size()},
                                  out->data());
    seal.encrypted = true;
    seal.body = *out;
    return seal;
  }
  seal.tag = cipher.Seal({parts, 2 + bulk.size()});
  return seal;
}

const char* FrameErrorName(FrameError e) {
  switch (e) {
    case FrameError::kNone:
      return "none";
    case FrameError::kBadMagic:
      return "bad magic";
    case FrameError::kBadVersion:
      return "unsupported protocol version";
    case FrameError::kOversize:
      return "length over limit";
    case FrameError::kTruncated:
      return "truncated frame";
    case FrameError::kBadMac:
      return "frame authentication failed (replayed frame or wrong cluster "
             "key?)";
    case FrameError::kBadHandshake:
      return "handshake proof mismatch (wrong cluster key?)";
    case FrameError::kCleartext:
      return "unencrypted frame on a secure connection (run every server "
             "and client with --secure, mounts with -o secure)";
  }
  return "unknown";
}

FrameError FrameErrorOf(const Status& s) {
  switch (s.code()) {
    case EPROTO:
      return FrameError::kBadMagic;
    case EPROTONOSUPPORT:
      return FrameError::kBadVersion;
    case EMSGSIZE:
      return FrameError::kOversize;
    case ECONNRESET:
      return FrameError::kTruncated;
    case EACCES:
      return FrameError::kBadMac;
    case EKEYREJECTED:
      return FrameError::kBadHandshake;
    case EPERM:
      return FrameError::kCleartext;
    default:
      return FrameError::kNone;
  }
}

void EncodeHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]) {
  coding::StoreLe<uint32_t>(out, kFrameMagic);
  out[4] = h.version;
  out[5] = h.flags;
  coding::StoreLe<uint16_t>(out + 6, h.type);
  coding::StoreLe<uint64_t>(out + 8, h.request_id);
  coding::StoreLe<uint32_t>(out + 16, h.payload_len);
  coding::StoreLe<uint32_t>(out + 20, h.bulk_len);
  coding::StoreLe<uint64_t>(out + 24, 0);
}

Status ParseHeader(std::span<const uint8_t> b, FrameHeader* h) {
  if (b.size() < kFrameHeaderSize)
    return Err(FrameError::kTruncated, "frame shorter than its header");
  const uint8_t* p = b.data();
  if (coding::LoadLe<uint32_t>(p) != kFrameMagic)
    return Err(FrameError::kBadMagic,
               "bad frame magic (not a stripefs peer, or stream out of sync)");
  h->version = p[4];
  if (h->version != kProtocolVersion)
    return Err(FrameError::kBadVersion,
               "protocol version " + std::to_string(h->version) +
                   " not supported (this build speaks " +
                   std::to_string(kProtocolVersion) +
                   "); run the same stripefs version everywhere");
  h->flags = p[5];
  if ((h->flags & ~kKnownFlags) != 0 || coding::LoadLe<uint64_t>(p + 24) != 0)
    return Err(FrameError::kBadMagic,
               "unknown frame flags or reserved bits set");
  h->type = coding::LoadLe<uint16_t>(p + 6);
  h->request_id = coding::LoadLe<uint64_t>(p + 8);
  h->payload_len = coding::LoadLe<uint32_t>(p + 16);
  h->bulk_len = coding::LoadLe<uint32_t>(p + 20);
  if (h->payload_len > kMaxPayload || h->bulk_len > kMaxBulk)
    return Err(FrameError::kOversize, "frame length over the limit (payload " +
                                          std::to_string(h->payload_len) +
                                          ", bulk " +
                                          std::to_string(h->bulk_len) + ")");
  if ((h->flags & kFlagReject) && (h->payload_len != 0 || h->bulk_len != 0))
    return Err(FrameError::kBadMagic, "reject frame with a body");
  return Status::Ok();
}

std::vector<uint8_t> EncodeFrame(FrameCipher& cipher, FrameHeader h,
                                 std::span<const uint8_t> payload,
                                 std::span<const uint8_t> bulk) {
  std::vector<uint8_t> ciphertext;
  FrameSeal seal = SealFrame(cipher, h, payload, bulk, &ciphertext);
  std::vector<uint8_t> out(seal.header, seal.header + kFrameHeaderSize);
  if (seal.encrypted) {
    out.insert(out.end(), seal.body.begin(), seal.body.end());
  } else {
    out.insert(out.end(), payload.begin(), payload.end());
    out.insert(out.end(), bulk.begin(), bulk.end());
  }
  out.insert(out.end(), seal.tag.begin(), seal.tag.end());
  return out;
}

Result<Frame> DecodeFrame(FrameCipher& cipher, std::span<const uint8_t> bytes) {
  Frame f;
  STRIPEFS_RETURN_IF_ERROR(ParseHeader(bytes, &f.header));
  size_t body = size_t{f.header.payload_len} + f.header.bulk_len;
  size_t total = kFrameHeaderSize + body + kTagSize;
  if (bytes.size() < total)
    return Err(FrameError::kTruncated,
               "truncated frame: " + std::to_string(bytes.size()) + " of " +
                   std::to_string(total) + " bytes");
  if (bytes.size() > total)
    return Err(FrameError::kBadMagic, "trailing bytes after frame");
  if (f.header.flags & kFlagReject)
    return Status(EACCES,
                  std::string("peer rejected our frame: ") +
                      FrameErrorName(static_cast<FrameError>(f.header.type)));
  auto payload = bytes.subspan(kFrameHeaderSize, f.header.payload_len);
  auto bulk =
      bytes.subspan(kFrameHeaderSize + f.header.payload_len, f.header.bulk_len);
  auto tag = bytes.subspan(kFrameHeaderSize + body, kTagSize);
  f.payload.assign(payload.begin(), payload.end());
  f.bulk.assign(bulk.begin(), bulk.end());
  STRIPEFS_RETURN_IF_ERROR(
      VerifyFrame(cipher, bytes.data(), f.payload, f.bulk, tag));
  return f;
}

Status WriteFrame(int fd, FrameCipher& cipher, FrameHeader h,
                  std::span<const uint8_t> payload,
                  std::span<const uint8_t> bulk, Deadline deadline) {
  return WriteFrameGather(fd, cipher, h, payload, BulkParts(&bulk, 1),
                          deadline);
}

Status WriteFrameGather(int fd, FrameCipher& cipher, FrameHeader h,
                        std::span<const uint8_t> payload, BulkParts bulk,
                        Deadline deadline) {
  const size_t bulk_size = BulkSize(bulk);
  if (payload.size() > kMaxPayload || bulk_size > kMaxBulk)
    return Status(EMSGSIZE, "message too large for one frame (payload " +
                                std::to_string(payload.size()) + ", bulk " +
                                std::to_string(bulk_size) + " bytes)");
  FrameSeal seal = SealFrameGather(cipher, h, payload, bulk);
  iovec inline_iov[kInlineParts + 1];
  std::vector<iovec> heap_iov;
  iovec* iov = inline_iov;
  if (3 + bulk.size() > kInlineParts + 1) {
    heap_iov.resize(3 + bulk.size());
    iov = heap_iov.data();
  }
  int n = 0;
  iov[n++] = {seal.header, kFrameHeaderSize};
  if (seal.encrypted) {
    if (!seal.body.empty())
      iov[n++] = {const_cast<uint8_t*>(seal.body.data()), seal.body.size()};
    iov[n++] = {seal.tag.data(), seal.tag.size()};
    return SendAll(fd, iov, n, deadline);
  }
  if (!payload.empty())
    iov[n++] = {const_cast<uint8_t*>(payload.data()), payload.size()};
  for (std::span<const uint8_t> part : bulk) {
    if (!part.empty())
      iov[n++] = {const_cast<uint8_t*>(part.data()), part.size()};
  }
  iov[n++] = {seal.tag.data(), seal.tag.size()};
  return SendAll(fd, iov, n, deadline);
}

void EncodeRejectFrame(FrameError why, uint8_t out[kRejectFrameSize]) {
  FrameHeader h;
  h.flags = kFlagReject;
  h.type = static_cast<uint16_t>(why);
  std::memset(out, 0, kRejectFrameSize);
  EncodeHeader(h, out);
}

void WriteRejectFrame(int fd, FrameError why) {
  uint8_t buf[kRejectFrameSize];
  EncodeRejectFrame(why, buf);
  iovec iov{buf, sizeof(buf)};
  (void)SendAll(fd, &iov, 1, Clock::now() + std::chrono::milliseconds(100));
}

Result<Frame> ReadFrame(int fd, FrameCipher& cipher, Deadline deadline,
                        Clock::duration header_timeout) {
  uint8_t header[kFrameHeaderSize];
  STRIPEFS_RETURN_IF_ERROR(ReadFull(fd, header, 1, deadline, false));
  Deadline hd = deadline;
  if (header_timeout != Clock::duration::max())
    hd = std::min(deadline, Clock::now() + header_timeout);
  Status hs = ReadFull(fd, header + 1, kFrameHeaderSize - 1, hd, true);
  if (hs.code() == ETIMEDOUT && hd != deadline)
    return Status(ETIMEDOUT,
                  "frame header not complete within the header "
                  "timeout");
  STRIPEFS_RETURN_IF_ERROR(hs);
  Frame f;
  STRIPEFS_RETURN_IF_ERROR(ParseHeader(header, &f.header));
  return ReadFrameBody(fd, cipher, header, std::move(f), deadline);
}

namespace {

// The rest of a frame whose header (raw `header`, parsed into f.header) is
// in: payload, bulk (both growing), tag.
Result<Frame> ReadFrameBody(int fd, FrameCipher& cipher,
                            const uint8_t header[kFrameHeaderSize], Frame f,
                            Deadline deadline) {
  if (f.header.flags & kFlagReject) {
    uint8_t tag[kTagSize];
    (void)ReadFull(fd, tag, kTagSize, deadline, true);
    return Status(EACCES,
                  std::string("peer rejected our frame: ") +
                      FrameErrorName(static_cast<FrameError>(f.header.type)));
  }
  Tag tag;
  STRIPEFS_RETURN_IF_ERROR(
      ReadGrowing(fd, &f.payload, f.header.payload_len, deadline));
  STRIPEFS_RETURN_IF_ERROR(
      ReadGrowing(fd, &f.bulk, f.header.bulk_len, deadline));
  STRIPEFS_RETURN_IF_ERROR(
      ReadFull(fd, tag.data(), tag.size(), deadline, true));
  STRIPEFS_RETURN_IF_ERROR(VerifyFrame(cipher, header, f.payload, f.bulk, tag));
  return f;
}

}  // namespace

namespace {

// The rest of a frame whose header is in and of whose body `got` bytes
// were received already (by a receive that expected another shape).
Result<Frame> ReadFrameBodyAfter(int fd, FrameCipher& cipher,
                                 const uint8_t header[kFrameHeaderSize],
                                 Frame f, std::vector<uint8_t> got,
                                 Deadline deadline) {
  const FrameHeader& h = f.header;
  if (h.flags & kFlagReject)
    return Status(EACCES, std::string("peer rejected our frame: ") +
                              FrameErrorName(static_cast<FrameError>(h.type)));
  const size_t body = size_t{h.payload_len} + h.bulk_len;
  const size_t total = body + kTagSize;
  if (got.size() > total)
    return Err(FrameError::kBadMagic, "trailing bytes after frame");
  std::vector<uint8_t> rest;
  STRIPEFS_RETURN_IF_ERROR(
      ReadGrowing(fd, &rest, total - got.size(), deadline));
  got.insert(got.end(), rest.begin(), rest.end());
  const std::span<uint8_t> all(got);
  STRIPEFS_RETURN_IF_ERROR(VerifyFrame(
      cipher, header, all.subspan(0, h.payload_len),
      all.subspan(h.payload_len, h.bulk_len), all.subspan(body, kTagSize)));
  f.payload.assign(got.begin(), got.begin() + h.payload_len);
  f.bulk.assign(got.begin() + h.payload_len, got.begin() + body);
  return f;
}

// The reply of ReadFrameInto when its payload length is known: header,
// payload, bulk (in place) and tag with ONE recvmsg when they are all
// there; on a blocking fd (shape.block > 0) that recvmsg is also the wait
// (no poll). A frame of another shape (an error reply) continues on the
// general path with the bytes already received.
Result<Frame> ReadShapedReply(int fd, FrameCipher& cipher, Deadline deadline,
                              std::span<uint8_t> bulk_into,
                              const ReplyShape& shape, bool* in_place) {
  uint8_t header[kFrameHeaderSize];
  uint8_t payload[ReplyShape::kMaxPayload];
  Tag tag;
  iovec iov[4] = {{header, kFrameHeaderSize},
                  {payload, shape.payload},
                  {bulk_into.data(), bulk_into.size()},
                  {tag.data(), tag.size()}};
  bool block = shape.block.count() > 0 && deadline - Clock::now() > shape.block;
  if (!block) STRIPEFS_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline));
  size_t got = 0;
  for (;;) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 4;
    // Blocking: sleeps at most shape.block (SO_RCVTIMEO), then EAGAIN.
    ssize_t n = ::recvmsg(fd, &msg, block ? 0 : MSG_DONTWAIT);
    if (n > 0) {
      got = static_cast<size_t>(n);
      break;
    }
    if (n == 0) return Status(ENOTCONN, "connection closed by peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Status::FromErrno(errno, "recv");
    block = false;
    STRIPEFS_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline));
  }
  if (got < kFrameHeaderSize) {
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, header + got, kFrameHeaderSize - got, deadline, true));
    got = kFrameHeaderSize;
  }
  Frame f;
  STRIPEFS_RETURN_IF_ERROR(ParseHeader({header, kFrameHeaderSize}, &f.header));
  const FrameHeader& h = f.header;
  if ((h.flags & kFlagReject) || h.payload_len != shape.payload ||
      h.bulk_len != bulk_into.size()) {
    // Another shape: gather what arrived past the header, in order.
    std::vector<uint8_t> body;
    size_t left = got - kFrameHeaderSize;
    for (int i = 1; i < 4 && left > 0; ++i) {
      const size_t take = std::min(left, iov[i].iov_len);
      const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
      body.insert(body.end(), p, p + take);
      left -= take;
    }
    return ReadFrameBodyAfter(fd, cipher, header, std::move(f), std::move(body),
                              deadline);
  }
  // The expected shape: receive the rest in place.
  int i = 0;
  size_t skip = got;
  while (i < 4 && skip >= iov[i].iov_len) skip -= iov[i++].iov_len;
  if (i < 4) {
    iov[i].iov_base = static_cast<uint8_t*>(iov[i].iov_base) + skip;
    iov[i].iov_len -= skip;
    STRIPEFS_RETURN_IF_ERROR(RecvAll(fd, iov + i, 4 - i, deadline));
  }
  const std::span<uint8_t> pl(payload, shape.payload);
  STRIPEFS_RETURN_IF_ERROR(VerifyFrame(cipher, header, pl, bulk_into, tag));
  f.payload.assign(pl.begin(), pl.end());
  *in_place = true;
  return f;
}

}  // namespace

Result<Frame> ReadFrameInto(int fd, FrameCipher& cipher, Deadline deadline,
                            std::span<uint8_t> bulk_into, bool* in_place,
                            const ReplyShape& shape) {
  *in_place = false;
  if (!bulk_into.empty() && shape.payload <= ReplyShape::kMaxPayload)
    return ReadShapedReply(fd, cipher, deadline, bulk_into, shape, in_place);
  // The reply is rarely there yet: wait first rather than fail a recv.
  STRIPEFS_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline));
  uint8_t header[kFrameHeaderSize];
  STRIPEFS_RETURN_IF_ERROR(
      ReadFull(fd, header, kFrameHeaderSize, deadline, false));
  Frame f;
  STRIPEFS_RETURN_IF_ERROR(ParseHeader(header, &f.header));
  const FrameHeader& h = f.header;
  if ((h.flags & kFlagReject) || bulk_into.empty() ||
      h.bulk_len != bulk_into.size() || h.payload_len > kEagerBytes) {
    return ReadFrameBody(fd, cipher, header, std::move(f), deadline);
  }
  f.payload.resize(h.payload_len);
  Tag tag;
  iovec iov[3] = {{f.payload.data(), f.payload.size()},
                  {bulk_into.data(), bulk_into.size()},
                  {tag.data(), tag.size()}};
  STRIPEFS_RETURN_IF_ERROR(RecvAll(fd, iov, 3, deadline));
  STRIPEFS_RETURN_IF_ERROR(
      VerifyFrame(cipher, header, f.payload, bulk_into, tag));
  *in_place = true;
  return f;
}

void EncodeHandshakePrefix(HandshakeKind kind,
                           uint8_t out[kHandshakePrefixSize]) {
  coding::StoreLe<uint32_t>(out, kFrameMagic);
  out[4] = kProtocolVersion;
  out[5] = static_cast<uint8_t>(kind);
  coding::StoreLe<uint16_t>(out + 6, 0);
}

Status ParseHandshakePrefix(std::span<const uint8_t> b, HandshakeKind want) {
  if (b.size() < kHandshakePrefixSize)
    return Err(FrameError::kTruncated, "handshake message too short");
  const uint8_t* p = b.data();
  if (coding::LoadLe<uint32_t>(p) != kFrameMagic)
    return Err(FrameError::kBadMagic,
               "bad handshake magic (not a stripefs peer)");
  if (p[4] != kProtocolVersion)
    return Err(FrameError::kBadVersion,
               "peer speaks protocol version " + std::to_string(p[4]) +
                   ", this build speaks " + std::to_string(kProtocolVersion) +
                   "; run the same stripefs version everywhere");
  if (want == HandshakeKind::kServerHello && p[5] == kFlagReject) {
    FrameError why = static_cast<FrameError>(coding::LoadLe<uint16_t>(p + 6));
    return Status(EACCES, std::string("peer rejected our handshake: ") +
                              FrameErrorName(why));
  }
  if (p[5] != static_cast<uint8_t>(want) ||
      coding::LoadLe<uint16_t>(p + 6) != 0)
    return Err(FrameError::kBadMagic,
               "unexpected handshake message (kind " + std::to_string(p[5]) +
                   ", expected " + std::to_string(static_cast<int>(want)) +
                   ")");
  return Status::Ok();
}

}  // namespace stripefs::rpc

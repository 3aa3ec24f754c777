// Wire layouts of the stripefs protocol (version 6): the session handshake
// that opens every connection, and the frames that follow it.
//
// Handshake (fixed sizes, no lengths from the peer; see session.h for the
// cryptography, identity.h for identities and server bindings). Every
// message starts with an 8-byte prefix
//   @0 u32 magic 'SFS1'  @4 u8 version (6)  @5 u8 kind  @6 u16 reserved (0)
//   ClientHello (kind 0x41): prefix, @8 32-byte client nonce,
//                @40 16-byte identity salt, @56 48-byte identity name
//                (NUL-padded; "server", admin.NAME, client.NAME)  = 104
//   ServerHello (kind 0x42): prefix, @8 server nonce, @40 u8 server role
//                (1 metad, 2 chunkd), @41 3 zero bytes, @44 u32 server id,
//                @48 16-byte volume UUID, @64 server proof         = 96
//   ClientProof (kind 0x43): prefix, @8 32-byte client proof          = 40
// The proofs and session keys cover every byte before the server proof
// (session.h), so the version, the identity and the server's role, id and
// volume are all under the MAC. The prefix shares magic and version with a
// frame header, so an older peer (version 1-5) reports "protocol version 6
// not supported" and we report its version.
// The kinds have bits outside kKnownFlags set, so a frame header is never
// mistaken for a handshake message or the reverse.
//
// Frame (after the handshake; little-endian):
//   @0  u32 magic 'SFS1'   @4  u8 version   @5 u8 flags   @6 u16 type
//   @8  u64 request id     @16 u32 payload length   @20 u32 bulk length
//   @24 u64 reserved (0)
//   then payload, bulk, and a 16-byte Poly1305 tag over header +
//   payload + bulk under the connection's per-direction key and frame
//   sequence number (FrameCipher, session.h). With flag kFlagSecure the
//   payload and bulk are ChaCha20-encrypted and the tag is the AEAD's over
//   the header (additional data) and that ciphertext; a receiver in secure
//   mode refuses a frame without the flag (EACCES), and a server answers a
//   secure request securely whatever its own mode. Lengths are checked against
//   kMaxPayload/kMaxBulk before anything is allocated. A "reject" frame
//   (flag kFlagReject, no body, zero tag, not authenticated) is what a
//   server sends before closing a connection whose handshake or frame
//   failed, so the client can say why; it carries no data.
//
// Free functions, no shared state; thread-safe except that a FrameCipher
// may be used by one thread at a time. Errors (Status codes):
//   EPERM unencrypted frame refused in secure mode,
//   EPROTO bad magic / reserved bits, EPROTONOSUPPORT other version,
//   EMSGSIZE length over the limit, ECONNRESET truncated (peer closed
//   mid-frame), ENOTCONN clean close between frames, EACCES tag mismatch
//   (replayed, reordered, other connection, wrong key) or a reject frame,
//   EKEYREJECTED handshake proof mismatch, ETIMEDOUT deadline.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/rpc/session.h"
#include "common/buffer_pool.h"
#include "common/status.h"

namespace stripefs::rpc {

inline constexpr uint32_t kFrameMagic = 0x31534653;  // "SFS1"
// 6: cluster map placement scheme and server weights.
inline constexpr uint8_t kProtocolVersion = 6;
inline constexpr size_t kFrameHeaderSize = 32;
inline constexpr uint32_t kMaxPayload = 16u << 20;  // encoded fields
inline constexpr uint32_t kMaxBulk = 64u << 20;     // raw chunk bytes

// Handshake layout (see the top of this file).
inline constexpr size_t kHandshakePrefixSize = 8;
inline constexpr size_t kHelloSaltAt = kHandshakePrefixSize + kNonceSize;
inline constexpr size_t kHelloNameAt = kHelloSaltAt + kEntitySaltSize;
inline constexpr size_t kClientHelloSize = kHelloNameAt + kEntityNameMax;
// role, 3 zero bytes, u32 id, volume UUID
inline constexpr size_t kBindingSize = 8 + kVolumeIdSize;
inline constexpr size_t kServerProofAt =
    kHandshakePrefixSize + kNonceSize + kBindingSize;
inline constexpr size_t kServerHelloSize = kServerProofAt + kProofSize;
inline constexpr size_t kClientProofSize = kHandshakePrefixSize + kProofSize;
inline constexpr size_t kRejectFrameSize = kFrameHeaderSize + kTagSize;
enum class HandshakeKind : uint8_t {
  kClientHello = 0x41,
  kServerHello = 0x42,
  kClientProof = 0x43,
};
static_assert(kClientHelloSize == 104 && kServerHelloSize == 96 &&
              kClientProofSize == 40);
static_assert(kHandshakePrefixSize <= kFrameHeaderSize);

enum FrameFlags : uint8_t {
  kFlagResponse = 1u << 0,
  kFlagReject = 1u << 1,
  kFlagSecure = 1u << 2,  // payload and bulk encrypted
};
inline constexpr uint8_t kKnownFlags =
    kFlagResponse | kFlagReject | kFlagSecure;
static_assert((static_cast<uint8_t>(HandshakeKind::kClientHello) &
               ~kKnownFlags) != 0);

// Why a frame or handshake was refused; also the `type` of a reject frame.
enum class FrameError : uint16_t {
  kNone = 0,
  kBadMagic,
  kBadVersion,
  kOversize,
  kTruncated,
  kBadMac,        // frame tag mismatch
  kBadHandshake,  // handshake proof mismatch
  kCleartext,     // unencrypted frame where secure mode is required
};
const char* FrameErrorName(FrameError e);
// Classifies a Status returned by the decode/read functions below.
FrameError FrameErrorOf(const Status& s);

struct FrameHeader {
  uint8_t version = kProtocolVersion;
  uint8_t flags = 0;
  uint16_t type = 0;
  uint64_t request_id = 0;
  uint32_t payload_len = 0;
  uint32_t bulk_len = 0;
};

// The bulk is page-aligned (AlignedBytes): chunk data received into it goes
// to the chunk store's O_DIRECT write without a staging copy.
struct Frame {
  FrameHeader header;
  std::vector<uint8_t> payload;
  AlignedBytes bulk;
};

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline NoDeadline() { return Deadline::max(); }

void EncodeHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]);
// Checks magic, version, flags, reserved and length limits. No tag.
Status ParseHeader(std::span<const uint8_t> bytes, FrameHeader* h);

// Handshake messages. Parse* check magic, version, kind and reserved bits
// of exactly-sized input (EPROTO / EPROTONOSUPPORT; EACCES for a reject
// frame where a ServerHello was expected).
void EncodeHandshakePrefix(HandshakeKind kind,
                           uint8_t out[kHandshakePrefixSize]);
Status ParseHandshakePrefix(std::span<const uint8_t> bytes, HandshakeKind want);

// Serialises a whole frame into one buffer (tests, fuzz seeds), sealed with
// the next sequence number of `cipher`. Length fields of `h` are filled in.
std::vector<uint8_t> EncodeFrame(FrameCipher& cipher, FrameHeader h,
                                 std::span<const uint8_t> payload,
                                 std::span<const uint8_t> bulk);
// Parses one complete frame from `bytes` (exactly one frame, nothing
// after it), verifying lengths and the tag with the next sequence number of
// `cipher` (which advances whether or not the tag matches).
Result<Frame> DecodeFrame(FrameCipher& cipher, std::span<const uint8_t> bytes);

// Header bytes (lengths filled in) and tag of a frame about to be sent; the
// caller sends header, payload, bulk, tag in that order (an event loop that
// sends with io_uring instead of WriteFrame). A secure frame (the cipher is
// in secure mode, or h.flags has kFlagSecure) is encrypted into
// `*ciphertext` (resized; the cipher's scratch() when null), and `body`
// points at it: the caller sends header, body, tag instead.
struct FrameSeal {
  uint8_t header[kFrameHeaderSize];
  Tag tag;
  bool encrypted = false;
  std::span<const uint8_t> body;  // encrypted payload + bulk
};
FrameSeal SealFrame(FrameCipher& cipher, FrameHeader h,
                    std::span<const uint8_t> payload,
                    std::span<const uint8_t> bulk,
                    std::vector<uint8_t>* ciphertext = nullptr);

// A bulk gathered from several buffers: on the wire, their concatenation.
using BulkParts = std::span<const std::span<const uint8_t>>;
// SealFrame of a frame whose bulk is the concatenation of `bulk`.
FrameSeal SealFrameGather(FrameCipher& cipher, FrameHeader h,
                          std::span<const uint8_t> payload, BulkParts bulk,
                          std::vector<uint8_t>* ciphertext = nullptr);
// Checks the tag of a frame received in parts (`header` the raw header
// bytes) and decrypts payload and bulk in place when the frame is secure.
// EACCES on mismatch, or for a cleartext frame when `cipher` is in secure
// mode; payload and bulk are then unspecified.
Status VerifyFrame(FrameCipher& cipher, const uint8_t header[kFrameHeaderSize],
                   std::span<uint8_t> payload, std::span<uint8_t> bulk,
                   std::span<const uint8_t> tag);

// Writes one frame to a socket with a single sendmsg gather list
// (header, payload, bulk from the caller's buffer, tag): no copy of the bulk.
// A secure frame is encrypted into the cipher's scratch() (one pass over
// the bytes, the buffer reused) and sent from there.
Status WriteFrame(int fd, FrameCipher& cipher, FrameHeader h,
                  std::span<const uint8_t> payload,
                  std::span<const uint8_t> bulk, Deadline deadline);
// WriteFrame whose bulk is gathered from `bulk`'s buffers, none copied
// (a batch of chunk ops, each with its own bytes).
Status WriteFrameGather(int fd, FrameCipher& cipher, FrameHeader h,
                        std::span<const uint8_t> payload, BulkParts bulk,
                        Deadline deadline);
// Writes a reject frame (best effort, short deadline).
void WriteRejectFrame(int fd, FrameError why);
// Reject frame bytes (for event loops that send them themselves).
void EncodeRejectFrame(FrameError why, uint8_t out[kRejectFrameSize]);
// Reads one frame; the bulk is received straight into Frame::bulk (frames
// over 4 MiB are received in growing steps, so memory follows the bytes
// that actually arrived, not the length a peer claims). Once the first
// byte of the frame is in, its header must be complete within
// `header_timeout` (and everything by `deadline`).
// `fd` may be blocking or not: receives pass MSG_DONTWAIT and poll for the
// deadline.
Result<Frame> ReadFrame(
    int fd, FrameCipher& cipher, Deadline deadline,
    Clock::duration header_timeout = Clock::duration::max());

// ReadFrame for a caller that knows how big the bulk will be (a client
// waiting for its reply): a bulk of exactly bulk_into.size() bytes is
// received straight into `bulk_into` (*in_place set, Frame::bulk empty; on
// error bulk_into holds unspecified bytes); any other frame is read as
// ReadFrame does. Polls first and takes payload, bulk and tag with one
// recvmsg when they are there: three system calls for a typical reply.
//
// With a `shape` (the payload length the reply will have when it succeeds,
// e.g. an OK status and no results), header, payload, bulk and tag are
// received with one recvmsg when they are there; on a blocking fd whose
// receive timeout (SO_RCVTIMEO) is at most shape.block, that recvmsg is
// also the wait (no poll): one system call for a typical reply. A reply of
// another shape (an error) is read as above with the bytes received.
struct ReplyShape {
  static constexpr size_t kMaxPayload = 256;
  size_t payload = SIZE_MAX;  // unknown: no single receive
  // > 0: fd blocks in recv for at most this long; used only while the
  // deadline is further away than that.
  Clock::duration block{0};
};
Result<Frame> ReadFrameInto(int fd, FrameCipher& cipher, Deadline deadline,
                            std::span<uint8_t> bulk_into, bool* in_place,
                            const ReplyShape& shape = {});

// Low-level socket helpers shared with the handshake (they never block in
// recv/send, MSG_DONTWAIT, whatever the fd's mode; poll for the deadline).
// ReadFull: exactly `len` bytes; `started` says a message was already under way
// (EOF is then ECONNRESET, else ENOTCONN).
Status ReadFull(int fd, uint8_t* buf, size_t len, Deadline d, bool started);
Status SendAll(int fd, iovec* iov, int iovcnt, Deadline d);

}  // namespace stripefs::rpc

// Wire frames of the stripefs protocol: a fixed 32-byte header, a small
// encoded payload, an optional raw bulk section (chunk data), and a
// 32-byte HMAC-SHA256 trailer.
//
// Layout (little-endian):
//   @0  u32 magic 'SFS1'   @4  u8 version   @5 u8 flags   @6 u16 type
//   @8  u64 request id     @16 u32 payload length   @20 u32 bulk length
//   @24 u32 CRC32C over header (this field zero) + payload + bulk
//   @28 u32 reserved (0)
//   then payload, bulk, HMAC-SHA256(cluster key, header + payload + bulk).
// Lengths are checked against kMaxPayload/kMaxBulk before anything is
// allocated. A "reject" frame (flag kFlagReject, no payload, MAC not
// checked) is what a server sends before closing a connection whose frame
// failed authentication, so the client can say why; it carries no data.
//
// Free functions, no state; thread-safe. Errors (Status codes):
//   EPROTO bad magic / reserved bits, EPROTONOSUPPORT other version,
//   EMSGSIZE length over the limit, ECONNRESET truncated (peer closed
//   mid-frame), ENOTCONN clean close between frames, EBADMSG CRC mismatch,
//   EACCES HMAC mismatch (wrong key) or a reject frame, ETIMEDOUT deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "common/status.h"

namespace stripefs::rpc {

inline constexpr uint32_t kFrameMagic = 0x31534653;  // "SFS1"
inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderSize = 32;
inline constexpr uint32_t kMaxPayload = 16u << 20;  // encoded fields
inline constexpr uint32_t kMaxBulk = 64u << 20;     // raw chunk bytes

enum FrameFlags : uint8_t {
  kFlagResponse = 1u << 0,
  kFlagReject = 1u << 1,
};
inline constexpr uint8_t kKnownFlags = kFlagResponse | kFlagReject;

// Why a frame was refused; also the `type` of a reject frame.
enum class FrameError : uint16_t {
  kNone = 0,
  kBadMagic,
  kBadVersion,
  kOversize,
  kTruncated,
  kBadCrc,
  kBadMac,
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
  uint32_t crc = 0;
};

struct Frame {
  FrameHeader header;
  std::vector<uint8_t> payload;
  std::vector<uint8_t> bulk;
};

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline NoDeadline() { return Deadline::max(); }

void EncodeHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]);
// Checks magic, version, flags, reserved and length limits. No CRC/MAC.
Status ParseHeader(std::span<const uint8_t> bytes, FrameHeader* h);

// Serialises a whole frame into one buffer (tests, fuzz seeds). The CRC and
// length fields of `h` are filled in.
std::vector<uint8_t> EncodeFrame(const ClusterKey& key, FrameHeader h,
                                 std::span<const uint8_t> payload,
                                 std::span<const uint8_t> bulk);
// Parses one complete frame from `bytes` (exactly one frame, nothing
// after it), verifying lengths, CRC and HMAC.
Result<Frame> DecodeFrame(const ClusterKey& key,
                          std::span<const uint8_t> bytes);

// Header bytes (CRC and lengths filled in) and MAC of a frame about to be
// sent; the caller sends header, payload, bulk, mac in that order (an event
// loop that sends with io_uring instead of WriteFrame).
struct FrameSeal {
  uint8_t header[kFrameHeaderSize];
  Mac mac;
};
FrameSeal SealFrame(const ClusterKey& key, FrameHeader h,
                    std::span<const uint8_t> payload,
                    std::span<const uint8_t> bulk);
// Checks CRC and HMAC of a frame received in parts (`header` are the raw
// header bytes, `h` their parsed form). EBADMSG / EACCES as above.
Status VerifyFrame(const ClusterKey& key,
                   const uint8_t header[kFrameHeaderSize], const FrameHeader& h,
                   std::span<const uint8_t> payload,
                   std::span<const uint8_t> bulk, std::span<const uint8_t> mac);

// Writes one frame to a socket with a single sendmsg gather list
// (header, payload, bulk from the caller's buffer, MAC): no copy of the bulk.
Status WriteFrame(int fd, const ClusterKey& key, FrameHeader h,
                  std::span<const uint8_t> payload,
                  std::span<const uint8_t> bulk, Deadline deadline);
// Writes a reject frame (best effort, short deadline).
void WriteRejectFrame(int fd, FrameError why);
// Reads one frame; the bulk is received straight into Frame::bulk (frames
// over 4 MiB are received in growing steps, so memory follows the bytes
// that actually arrived, not the length a peer claims).
// `fd` must be non-blocking (poll is used for the deadline).
Result<Frame> ReadFrame(int fd, const ClusterKey& key, Deadline deadline);

}  // namespace stripefs::rpc

// FrameAssembler: cuts one connection's TCP byte stream into frames for an
// event loop that receives into buffers it is handed (io_uring recv) and
// must never block.
//
// The loop asks RecvBuffer() where to receive, receives up to that many
// bytes, and reports the count with Commit(). Small frames go through a
// 16 KiB staging buffer (one recv usually brings a whole request, or several);
// the payload and bulk of larger frames are received straight into their
// vectors, so chunk data is not copied (the bulk into page-aligned
// AlignedBytes, so a chunk goes on to the store's O_DIRECT write as is).
// The 32-byte header is parsed as soon as it is in (magic, version, flags,
// reserved bits, lengths against kMaxPayload/kMaxBulk) before anything is
// allocated; bodies over 4 MiB are
// allocated in doubling steps as their bytes arrive, so a peer claiming
// 64 MiB costs memory only for what it really sends.
//
// A bulk vector the caller is done with can be handed back (Recycle): the
// next frame's bulk of at most its capacity (and at most 4 MiB) is received
// into it, so a connection that streams equal-sized chunks allocates
// and page-faults its bulk buffer once, not once per frame.
//
// The tag is NOT checked here: a completed frame is a RawFrame that the
// caller verifies, in stream order, with the connection's receive
// FrameCipher (on a worker thread, so hashing does not run on the loop
// thread). The server creates an assembler only after the handshake
// (handshake.h), so no buffer is ever sized from an unauthenticated header.
//
// Thread-safety: none. One assembler per connection, used by one thread.
// Owns its staging buffer and the frame being assembled.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/rpc/frame.h"
#include "common/status.h"

namespace stripefs::rpc {

// A frame whose lengths and header fields are valid but whose tag has not
// been checked yet.
struct RawFrame {
  uint8_t header_bytes[kFrameHeaderSize] = {};
  FrameHeader header;
  std::vector<uint8_t> payload;
  AlignedBytes bulk;  // page-aligned (frame.h)
  Tag tag{};

  // Tag check with the next sequence number of `cipher` (EACCES), then the
  // decoded Frame.
  Result<Frame> Verify(FrameCipher& cipher) &&;
};

class FrameAssembler {
 public:
  static constexpr size_t kStageSize = 16 << 10;
  // Body parts with at least this many bytes still to come are received
  // directly into their destination instead of the staging buffer.
  static constexpr size_t kDirectMin = 4 << 10;

  FrameAssembler();

  // Where the next receive must write; never empty. `*exact` is set when the
  // span is exactly what the current frame still needs (then the receive may
  // wait for all of it, MSG_WAITALL, without reading past the frame).
  std::span<uint8_t> RecvBuffer(bool* exact);

  // `n` bytes arrived in the span last returned by RecvBuffer. Completed
  // frames are appended to *out in stream order. A frame error (EPROTO,
  // EPROTONOSUPPORT, EMSGSIZE, or EACCES for a reject frame sent to us; see
  // FrameErrorOf) ends the stream: frames completed before it are still in
  // *out, and the assembler must not be used again.
  Status Commit(size_t n, std::vector<RawFrame>* out);

  // Keeps `bulk` (its contents are overwritten before use) for the next
  // frame whose bulk fits its capacity; one spare at most, and none over
  // 4 MiB, so an idle connection holds no more than that.
  void Recycle(AlignedBytes bulk);

  // True when part of a frame has arrived (EOF now means truncation).
  bool mid_frame() const;
  // True when part, but not all, of a frame header has arrived.
  bool mid_header() const { return part_ == Part::kHeader && have_ > 0; }

 private:
  enum class Part { kHeader, kPayload, kBulk, kTag };
  // The destination of the current body part and its final length.
  uint8_t* PartData();
  size_t PartAllocated() const;
  size_t PartLength() const;
  // Grows the current part's vector when it is full but incomplete.
  void GrowPart();
  // Moves to the next part (skipping empty ones); completes the frame.
  void NextPart(std::vector<RawFrame>* out);
  // Consumes staged bytes into the current frame.
  Status Drain(std::vector<RawFrame>* out);

  std::vector<uint8_t> stage_;
  size_t pos_ = 0;  // first unconsumed staged byte
  size_t end_ = 0;  // end of staged bytes
  bool last_direct_ = false;

  Part part_ = Part::kHeader;
  size_t have_ = 0;  // bytes of the current part received
  RawFrame cur_;
  AlignedBytes spare_bulk_;  // Recycle()d, for the next bulk
};

}  // namespace stripefs::rpc

#include "backend/rpc/frame_assembler.h"

#include <algorithm>
#include <cstring>

namespace stripefs::rpc {
namespace {

// Bodies up to this size are allocated at once (received in place); larger
// ones grow in doubling steps as their bytes arrive.
constexpr size_t kEagerBytes = 4u << 20;

}  // namespace

Result<Frame> RawFrame::Verify(FrameCipher& cipher) && {
  STRIPEFS_RETURN_IF_ERROR(
      VerifyFrame(cipher, header_bytes, payload, bulk, tag));
  Frame f;
  f.header = header;
  f.payload = std::move(payload);
  f.bulk = std::move(bulk);
  return f;
}

FrameAssembler::FrameAssembler() : stage_(kStageSize) {}

bool FrameAssembler::mid_frame() const {
  return part_ != Part::kHeader || have_ > 0 || end_ > pos_;
}

uint8_t* FrameAssembler::PartData() {
  switch (part_) {
    case Part::kPayload:
      return cur_.payload.data();
    case Part::kBulk:
      return cur_.bulk.data();
    case Part::kTag:
      return cur_.tag.data();
    case Part::kHeader:
      return cur_.header_bytes;
  }
  return nullptr;
}

size_t FrameAssembler::PartAllocated() const {
  switch (part_) {
    case Part::kPayload:
      return cur_.payload.size();
    case Part::kBulk:
      return cur_.bulk.size();
    case Part::kTag:
      return kTagSize;
    case Part::kHeader:
      return kFrameHeaderSize;
  }
  return 0;
}

size_t FrameAssembler::PartLength() const {
  switch (part_) {
    case Part::kPayload:
      return cur_.header.payload_len;
    case Part::kBulk:
      return cur_.header.bulk_len;
    case Part::kTag:
      return kTagSize;
    case Part::kHeader:
      return kFrameHeaderSize;
  }
  return 0;
}

void FrameAssembler::GrowPart() {
  if (part_ != Part::kPayload && part_ != Part::kBulk) return;
  const size_t len = PartLength();
  auto grow = [&](auto* v) {
    if (have_ < v->size() || have_ >= len) return;
    size_t next =
        v->empty() ? std::min(len, kEagerBytes) : std::min(len, v->size() * 2);
    v->resize(next);
  };
  if (part_ == Part::kPayload) return grow(&cur_.payload);
  if (cur_.bulk.empty() && have_ == 0 && spare_bulk_.capacity() >= len) {
    // A recycled buffer: resizing within its capacity allocates and fills
    // nothing (AlignedBytes leaves new bytes as they are), and every byte
    // is received before the frame completes.
    cur_.bulk = std::move(spare_bulk_);
    spare_bulk_ = {};
    cur_.bulk.resize(len);
    return;
  }
  grow(&cur_.bulk);
}

void FrameAssembler::Recycle(AlignedBytes bulk) {
  if (bulk.capacity() > kEagerBytes ||
      bulk.capacity() <= spare_bulk_.capacity())
    return;
  spare_bulk_ = std::move(bulk);
}

void FrameAssembler::NextPart(std::vector<RawFrame>* out) {
  for (;;) {
    have_ = 0;
    switch (part_) {
      case Part::kHeader:
        part_ = Part::kPayload;
        break;
      case Part::kPayload:
        part_ = Part::kBulk;
        break;
      case Part::kBulk:
        part_ = Part::kTag;
        break;
      case Part::kTag:
        out->push_back(std::move(cur_));
        cur_ = RawFrame();
        part_ = Part::kHeader;
        return;
    }
    if (PartLength() > 0) {
      GrowPart();
      return;
    }
  }
}

Status FrameAssembler::Drain(std::vector<RawFrame>* out) {
  while (pos_ < end_) {
    size_t avail = end_ - pos_;
    if (part_ == Part::kHeader) {
      size_t take = std::min(avail, kFrameHeaderSize - have_);
      std::memcpy(cur_.header_bytes + have_, stage_.data() + pos_, take);
      pos_ += take;
      have_ += take;
      if (have_ < kFrameHeaderSize) break;
      STRIPEFS_RETURN_IF_ERROR(ParseHeader(
          std::span<const uint8_t>(cur_.header_bytes, kFrameHeaderSize),
          &cur_.header));
      if (cur_.header.flags & kFlagReject) {
        return Status(
            EACCES,
            std::string("peer sent a reject frame (") +
                FrameErrorName(static_cast<FrameError>(cur_.header.type)) +
                ")");
      }
      NextPart(out);
      continue;
    }
    GrowPart();
    size_t take = std::min(avail, PartAllocated() - have_);
    std::memcpy(PartData() + have_, stage_.data() + pos_, take);
    pos_ += take;
    have_ += take;
    if (have_ == PartLength()) NextPart(out);
  }
  if (pos_ == end_) pos_ = end_ = 0;
  return Status::Ok();
}

std::span<uint8_t> FrameAssembler::RecvBuffer(bool* exact) {
  *exact = false;
  last_direct_ = false;
  if (part_ != Part::kHeader && pos_ == end_) {
    GrowPart();
    size_t room = PartAllocated() - have_;
    if (PartLength() - have_ >= kDirectMin && room > 0) {
      last_direct_ = true;
      *exact = true;  // never past the end of this part
      return std::span<uint8_t>(PartData() + have_, room);
    }
  }
  if (pos_ > 0) {  // keep the unconsumed tail (part of a header) at the front
    std::memmove(stage_.data(), stage_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  return std::span<uint8_t>(stage_.data() + end_, stage_.size() - end_);
}

Status FrameAssembler::Commit(size_t n, std::vector<RawFrame>* out) {
  if (last_direct_) {
    last_direct_ = false;
    have_ += n;
    if (have_ == PartLength()) NextPart(out);
    return Status::Ok();
  }
  end_ += n;
  return Drain(out);
}

}  // namespace stripefs::rpc

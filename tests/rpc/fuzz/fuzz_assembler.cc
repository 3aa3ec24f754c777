// libFuzzer target: FrameAssembler (the io_uring server's incremental frame
// reader). The first input byte picks the receive sizes, the rest is the
// byte stream. Must never crash; every frame it emits must be exactly the
// next bytes of the stream, and its Verify() must agree with DecodeFrame on
// those bytes (two ciphers at the same sequence number); an error must agree
// with ParseHeader on the failing header.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/rpc/frame_assembler.h"
#include "tests/rpc/fuzz/fuzz_key.h"

using namespace stripefs::rpc;
using stripefs::Status;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  stripefs::testing::Link by_decode = FuzzLink(), by_verify = FuzzLink();
  const size_t step_choices[] = {1, 3, 31, 32, 33, 100, 4096, 70000};
  size_t step = step_choices[data[0] % 8];
  std::span<const uint8_t> stream(data + 1, size - 1);

  FrameAssembler a;
  std::vector<RawFrame> frames;
  size_t off = 0, checked = 0;
  Status err;
  while (off < stream.size() && err.ok()) {
    bool exact = false;
    std::span<uint8_t> buf = a.RecvBuffer(&exact);
    if (buf.empty()) std::abort();
    size_t n = std::min({buf.size(), stream.size() - off, step});
    std::memcpy(buf.data(), stream.data() + off, n);
    off += n;
    err = a.Commit(n, &frames);
  }
  for (RawFrame& f : frames) {
    size_t len =
        kFrameHeaderSize + f.header.payload_len + f.header.bulk_len + kTagSize;
    if (checked + len > stream.size()) std::abort();
    auto slice = stream.subspan(checked, len);
    if (std::memcmp(slice.data(), f.header_bytes, kFrameHeaderSize) != 0 ||
        f.payload.size() != f.header.payload_len ||
        f.bulk.size() != f.header.bulk_len ||
        !std::equal(f.payload.begin(), f.payload.end(),
                    slice.begin() + kFrameHeaderSize) ||
        !std::equal(f.bulk.begin(), f.bulk.end(),
                    slice.begin() + kFrameHeaderSize + f.payload.size()) ||
        std::memcmp(f.tag.data(), slice.data() + len - kTagSize, kTagSize))
      std::abort();
    bool decoded = DecodeFrame(by_decode.rx, slice).ok();
    bool verified = std::move(f).Verify(by_verify.rx).ok();
    if (decoded != verified) std::abort();
    checked += len;
  }
  if (!err.ok()) {
    // The error is about the header that starts where the frames ended.
    FrameHeader h;
    if (checked + kFrameHeaderSize > stream.size()) std::abort();
    Status ps = ParseHeader(stream.subspan(checked, kFrameHeaderSize), &h);
    if (ps.ok() && !(h.flags & kFlagReject)) std::abort();
  } else if (!a.mid_frame() && checked != stream.size()) {
    std::abort();
  }
  return 0;
}

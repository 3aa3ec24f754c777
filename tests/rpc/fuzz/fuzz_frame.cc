// libFuzzer target: the frame decoder, from bytes (DecodeFrame) and from a
// socket stream (ReadFrame, consecutive frames verified with consecutive
// sequence numbers), plus an encode/decode round trip of frames whose header
// fields and body come from the input. Must never crash, and a frame that
// decodes must re-encode to the same bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "backend/rpc/frame.h"
#include "backend/rpc/tcp_socket.h"
#include "tests/rpc/fuzz/fuzz_key.h"

using namespace stripefs::rpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);

  // 1. Whole frame from bytes (the first frame of a connection).
  stripefs::testing::Link one = FuzzLink();
  auto f = DecodeFrame(one.rx, in);
  if (f.ok()) {
    auto again = EncodeFrame(one.tx, f->header, f->payload, f->bulk);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
      std::abort();
  }

  // 2. The same bytes as a stream on a socket (EOF after them).
  if (size <= 65536) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0) {
      UniqueFd a(sv[0]), b(sv[1]);
      ssize_t n = size ? ::send(a.get(), data, size, MSG_NOSIGNAL) : 0;
      if (n == static_cast<ssize_t>(size)) {
        a.Reset();
        stripefs::testing::Link stream = FuzzLink();
        for (int i = 0; i < 4; ++i) {  // consecutive frames in the stream
          auto r = ReadFrame(b.get(), stream.rx,
                             Clock::now() + std::chrono::seconds(1));
          if (!r.ok()) break;
        }
      }
    }
  }

  // 2b. The same stream read as a shaped reply (ReadFrameInto with a
  // ReplyShape, as RpcClient reads chunk replies). The expected payload and
  // bulk lengths are the ones the header claims, or one more than either
  // (by size % 3), so the in-place path and other shapes are both reached
  // from the seed frames. A frame read must be the frame DecodeFrame sees.
  if (size >= kFrameHeaderSize && size <= 65536) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0) {
      UniqueFd a(sv[0]), b(sv[1]);
      ssize_t n = ::send(a.get(), data, size, MSG_NOSIGNAL);
      if (n == static_cast<ssize_t>(size)) {
        a.Reset();
        stripefs::testing::Link stream = FuzzLink();
        uint32_t claimed_payload, claimed_bulk;
        std::memcpy(&claimed_payload, data + 16, 4);  // little-endian host
        std::memcpy(&claimed_bulk, data + 20, 4);
        ReplyShape shape;
        shape.payload =
            std::min<uint32_t>(claimed_payload, 300) + (size % 3 == 1 ? 1 : 0);
        std::vector<uint8_t> bulk(std::min<uint32_t>(claimed_bulk, 65536) +
                                  (size % 3 == 2 || claimed_bulk == 0 ? 1 : 0));
        bool in_place = false;
        auto r = ReadFrameInto(b.get(), stream.rx,
                               Clock::now() + std::chrono::seconds(1), bulk,
                               &in_place, shape);
        if (r.ok()) {
          stripefs::testing::Link check = FuzzLink();
          auto whole = DecodeFrame(
              check.rx,
              in.first(std::min(size, kFrameHeaderSize + r->header.payload_len +
                                          r->header.bulk_len + kTagSize)));
          // r->bulk is AlignedBytes, the caller's buffer a plain vector.
          const std::span<const uint8_t> got_bulk =
              in_place ? std::span<const uint8_t>(bulk)
                       : std::span<const uint8_t>(r->bulk);
          if (!whole.ok() || whole->payload != r->payload ||
              !std::ranges::equal(whole->bulk, got_bulk))
            std::abort();
        }
      }
    }
  }

  // 3. Round trip of a frame built from the input.
  if (size >= 12) {
    FrameHeader h;
    h.flags = data[0] & kFlagResponse;
    std::memcpy(&h.type, data + 1, 2);
    std::memcpy(&h.request_id, data + 3, 8);
    size_t split = data[11] % (size - 11);
    auto payload = in.subspan(12, split > size - 12 ? size - 12 : split);
    auto bulk = in.subspan(12 + payload.size());
    stripefs::testing::Link trip = FuzzLink();
    auto wire = EncodeFrame(trip.tx, h, payload, bulk);
    auto r = DecodeFrame(trip.rx, wire);
    if (!r.ok() || r->header.type != h.type ||
        r->header.request_id != h.request_id ||
        r->payload.size() != payload.size() || r->bulk.size() != bulk.size() ||
        !std::equal(payload.begin(), payload.end(), r->payload.begin()) ||
        !std::equal(bulk.begin(), bulk.end(), r->bulk.begin()))
      std::abort();
  }
  return 0;
}

// libFuzzer target for the FUSE request parser and the dirent decoders:
// every input must be rejected or parsed without reading past the buffer
// (ASan/UBSan check that). Input shapes:
//   * a whole /dev/fuse buffer (ParseDevBuffer, both ParseOptions);
//   * an io-uring split: the first 40 bytes are the header, byte 40 picks
//     the fixed-arg length (0..128), the rest is the payload;
//   * the bytes as a READDIR / READDIRPLUS body.
// A buffer that parses as FUSE_COMPOUND also goes through DecodeCompound and
// each decoded sub-request through ParseRequest (seed: corpus/compound).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuse/compound.h"
#include "fuse/dirent_encoder.h"
#include "fuse/request_parser.h"

using namespace stripefs::fuse;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized heap buffer so ASan catches overreads.
  std::vector<uint8_t> buf(data, data + size);
  std::span<const uint8_t> s(buf.data(), buf.size());
  ParseOptions plain, ext;
  ext.setxattr_ext = true;
  for (const ParseOptions& o : {plain, ext}) {
    ParseResult r = ParseDevBuffer(s, o);
    if (r.error == 0) {
      // Touch what the parser handed out.
      volatile size_t sum = r.req.name.size() + r.req.name2.size();
      for (uint8_t c : r.req.data) sum = sum + c;
      for (char c : r.req.name) sum = sum + static_cast<uint8_t>(c);
      if (r.req.opcode == stripefs::fuse_abi::FUSE_BATCH_FORGET) {
        auto b = r.req.In<stripefs::fuse_abi::fuse_batch_forget_in>();
        for (uint32_t i = 0; i < b.count; ++i)
          sum = sum + r.req.ForgetEntry(i).nodeid;
      }
      if (r.req.opcode == stripefs::fuse_abi::FUSE_COMPOUND) {
        CompoundDecode d = DecodeCompound(
            std::span<const uint8_t>(r.req.in, r.req.in_size), r.req.data, o);
        for (const auto& sub : d.subs) {
          ParseResult sr = ParseRequest(sub.header, sub.arg0, sub.rest, o);
          sum = sum + sr.req.name.size() + sr.req.data.size();
        }
      }
      (void)sum;
    }
  }
  if (size > sizeof(stripefs::fuse_abi::fuse_in_header)) {
    stripefs::fuse_abi::fuse_in_header h;
    std::memcpy(&h, buf.data(), sizeof(h));
    size_t rest_off = sizeof(h) + 1;
    size_t fixed = buf[sizeof(h)] % 129;
    std::vector<uint8_t> op_in(fixed);
    std::vector<uint8_t> payload;
    if (rest_off < size) {
      size_t take = std::min(fixed, size - rest_off);
      // An empty vector's data() may be null: memcpy(null, ..., 0) is UB.
      if (take > 0) std::memcpy(op_in.data(), buf.data() + rest_off, take);
      op_in.resize(take);
      payload.assign(buf.begin() + rest_off + take, buf.end());
    } else {
      op_in.clear();
    }
    ParseResult r = ParseRequest(h, op_in, payload, plain);
    (void)r;
  }
  ForEachDirent(s, [](uint64_t, std::string_view n, uint32_t, uint64_t) {
    volatile char c = n.empty() ? 0 : n.back();
    (void)c;
  });
  ForEachDirentPlus(s, [](const auto&, std::string_view n, uint32_t, uint64_t) {
    volatile char c = n.empty() ? 0 : n.back();
    (void)c;
  });
  return 0;
}

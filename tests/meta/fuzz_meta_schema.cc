// libFuzzer target for the MetaStore record decoders (meta_schema.cc): the
// first byte picks a decoder, the rest is its input. Decoders must never
// crash, and whatever they accept must re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend/meta/meta_schema.h"

using namespace stripefs;               // NOLINT(google-build-using-namespace)
using namespace stripefs::meta_schema;  // NOLINT(google-build-using-namespace)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto same = [&](const std::string& enc) {
    if (enc != in) __builtin_trap();
  };
  switch (data[0] % 10) {
    case 0:
      if (auto r = DecodeInode(in); r.ok()) same(EncodeInode(*r));
      break;
    case 1:
      if (auto r = DecodeDentry(in); r.ok()) same(EncodeDentry(*r));
      break;
    case 2: {
      StripeVersion sv;
      if (DecodeStripeValue(in, &sv).ok()) {
        same(EncodeStripeValue(sv.version, sv.missing_mask, sv.chunk_len));
      }
      break;
    }
    case 3:
      if (auto r = DecodeGeometry(in); r.ok()) same(EncodeGeometry(*r));
      break;
    case 4:
      if (auto r = DecodeStats(in); r.ok()) same(EncodeStats(*r));
      break;
    case 5:
      if (auto r = DecodeClusterMap(in); r.ok()) same(EncodeClusterMap(*r));
      break;
    case 6:
      if (auto r = DecodeU64(in); r.ok()) same(EncodeU64(*r));
      break;
    case 7: {
      // Key parsers: split the input into key and value at the middle.
      std::string_view key = in.substr(0, in.size() / 2);
      std::string_view value = in.substr(in.size() / 2);
      (void)ParseCookieSeq(key);
      (void)ParseOrphanIno(key);
      (void)ParseXattrName(key);
      if (auto r = ParseStripe(key, value); r.ok()) {
        if (StripeKey(r->inode, r->sv.stripe) != key) __builtin_trap();
      }
      break;
    }
    case 8:
      if (auto r = DecodeU32(in); r.ok()) same(EncodeU32(*r));
      break;
    case 9:
      if (auto r = DecodeLeaderLease(in); r.ok()) same(EncodeLeaderLease(*r));
      break;
  }
  return 0;
}

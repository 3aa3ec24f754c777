// libFuzzer target: every payload decoder. Input = u16 message type (LE),
// u8 direction (even: request, odd: response), then the payload. Decoding
// must never crash; whatever decodes must re-encode to the same bytes
// (DecodePayloadChecked aborts otherwise). Types beyond the known ones are
// folded onto the known list so every decoder gets exercised.
#include "backend/rpc/wire_messages.h"

using namespace stripefs::rpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  uint16_t type = static_cast<uint16_t>(data[0] | (data[1] << 8));
  if (MsgTypeName(type) == nullptr) {
    const auto& all = AllMsgTypes();
    type = static_cast<uint16_t>(all[type % all.size()]);
  }
  bool response = data[2] & 1;
  DecodePayloadChecked(type, response,
                       std::span<const uint8_t>(data + 3, size - 3));
  return 0;
}

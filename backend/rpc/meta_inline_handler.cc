#include "backend/rpc/meta_inline_handler.h"

#include "backend/rpc/wire_messages.h"

namespace stripefs::rpc {

bool MetaInlineHandler::InlineSafe(uint16_t type,
                                   std::span<const uint8_t> payload) const {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kLookup:
    case MsgType::kGetAttr:
    case MsgType::kReadLink:
    case MsgType::kGetXattr:
    case MsgType::kListXattr:
    case MsgType::kGetGeometry:
    case MsgType::kStatFs:
      return Caps().reads;
    case MsgType::kReadDir: {
      Msg<MsgType::kReadDir>::Request req;
      return Caps().reads && DecodeRequest<MsgType::kReadDir>(payload, &req) &&
             std::get<2>(req) <= kMaxInlineReadDirEntries;
    }
    case MsgType::kGetStripes: {
      Msg<MsgType::kGetStripes>::Request req;
      return Caps().reads &&
             DecodeRequest<MsgType::kGetStripes>(payload, &req) &&
             std::get<2>(req) <= kMaxInlineStripes;
    }
    case MsgType::kMkNode:
    case MsgType::kMkdir:
    case MsgType::kSymlink:
    case MsgType::kLink:
    case MsgType::kUnlink:
    case MsgType::kCreateEntry:
    case MsgType::kUnlinkEntry:
    case MsgType::kRmdir:
    case MsgType::kRename:
    case MsgType::kSetXattr:
    case MsgType::kRemoveXattr:
      return Caps().namespace_writes;
    case MsgType::kSetAttr: {
      // A size change is durable (chunks are deleted on its strength).
      Msg<MsgType::kSetAttr>::Request req;
      return Caps().namespace_writes &&
             DecodeRequest<MsgType::kSetAttr>(payload, &req) &&
             (std::get<1>(req).mask & kSetSize) == 0;
    }
    default:
      return false;
  }
}

}  // namespace stripefs::rpc

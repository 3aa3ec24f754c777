#include "backend/rpc/identity.h"

namespace stripefs::rpc {

const char* PrincipalName(Principal p) {
  switch (p) {
    case Principal::kServer:
      return "server";
    case Principal::kAdmin:
      return "admin";
    case Principal::kClient:
      return "client";
  }
  return "unknown";
}

Result<Principal> ParseEntity(std::string_view name) {
  if (name == kServerEntity) return Principal::kServer;
  Principal p;
  std::string_view rest;
  if (name.starts_with("admin.")) {
    p = Principal::kAdmin;
    rest = name.substr(6);
  } else if (name.starts_with("client.")) {
    p = Principal::kClient;
    rest = name.substr(7);
  } else {
    return Status::InvalidArgument(
        "identity '" + std::string(name) +
        "' must be client.NAME or admin.NAME (or \"server\")");
  }
  bool chars_ok = !rest.empty();
  for (char c : rest) {
    chars_ok = chars_ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '_' || c == '-');
  }
  if (!chars_ok || name.size() > kEntityNameMax) {
    return Status::InvalidArgument(
        "identity '" + std::string(name) + "': NAME must be 1 to " +
        std::to_string(kEntityNameMax - 7) +
        " characters of A-Z a-z 0-9 _ - (e.g. client.alice)");
  }
  return p;
}

std::string DescribeServer(ServerBinding b) {
  switch (b.role) {
    case ServerRole::kMetad:
      return "metad";
    case ServerRole::kChunkd:
      return "chunkd " + std::to_string(b.id);
    case ServerRole::kAny:
      break;
  }
  return "any server";
}

bool IsZero(const VolumeId& v) { return v == VolumeId{}; }

std::string VolumeIdHex(const VolumeId& v) {
  if (IsZero(v)) return "none";
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : v) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace stripefs::rpc

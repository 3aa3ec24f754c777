// Identities of a cluster (docs/wire-protocol.md "Identities") and what a
// server says it is in the handshake.
//
// Every connection proves one identity (an "entity", the cephx word):
//   server        the cluster (server) key file, 32 raw bytes: chunkd,
//                 metad and the tools on server hosts; may call everything
//   admin.NAME    an operator: everything a client may, plus the cluster
//                 map and the identity table (UpsertServer, SetServerState,
//                 auth add/ls/rm)
//   client.NAME   a mount or tool: namespace and chunk data calls only,
//                 optionally limited to a subtree or to reading
// An identity's key is HMAC-SHA256(server key, "stripefs identity key" ||
// name || salt) (ClusterKey::DeriveIdentity), so any server derives it from
// the name and salt the client sends; metad keeps the table of identities
// that exist (IdentityGate), so a removed one is refused from then on.
//
// Pure values and functions; thread-safe. IdentityGate implementations say
// their own thread-safety (they are called from server threads).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stripefs::rpc {

enum class Principal : uint8_t {
  kServer = 1 << 0,
  kAdmin = 1 << 1,
  kClient = 1 << 2,
};
// A set of principals (bits of Principal): who may send a message.
using Principals = uint8_t;
constexpr Principals operator|(Principal a, Principal b) {
  return static_cast<Principals>(static_cast<uint8_t>(a) |
                                 static_cast<uint8_t>(b));
}
constexpr Principals operator|(Principals a, Principal b) {
  return static_cast<Principals>(a | static_cast<uint8_t>(b));
}
constexpr bool Contains(Principals set, Principal p) {
  return (set & static_cast<uint8_t>(p)) != 0;
}
const char* PrincipalName(Principal p);  // "server", "admin", "client"

inline constexpr size_t kEntityNameMax = 48;  // "client." + 41 characters
inline constexpr size_t kEntitySaltSize = 16;
using EntitySalt = std::array<uint8_t, kEntitySaltSize>;
inline constexpr std::string_view kServerEntity = "server";

// The principal of an identity name: "server", "admin.NAME" or
// "client.NAME" with NAME of 1 to 41 characters [A-Za-z0-9_-]. EINVAL
// naming the rule otherwise.
Result<Principal> ParseEntity(std::string_view name);

// Who sent a request: the identity its connection proved in the handshake.
struct Caller {
  Principal principal = Principal::kServer;
  std::string entity{kServerEntity};
  EntitySalt salt{};  // all zero for "server"
};

// Decides whether an identity that proved its key may use the server
// (metad: it is in the identity table and not removed). Called after every
// handshake and before every request; must be cheap and thread-safe.
class IdentityGate {
 public:
  virtual ~IdentityGate() = default;
  // OK, or EKEYREVOKED with a message naming the identity and the fix.
  virtual Status Admit(const Caller& caller) const = 0;
};

// What a server says it is. The ServerHello carries it and both handshake
// proofs and the session keys cover it, so a connection relayed to another
// server, or to a server of another volume that shares the key, fails the
// client's check before any frame.
enum class ServerRole : uint8_t { kAny = 0, kMetad = 1, kChunkd = 2 };
// The volume's UUID (metad keeps it in the volume's metadata; chunkd learns
// it from its metad before it serves). All zero: not known.
inline constexpr size_t kVolumeIdSize = 16;
using VolumeId = std::array<uint8_t, kVolumeIdSize>;
struct ServerBinding {
  ServerRole role = ServerRole::kAny;  // kAny in a client: accept any server
  uint32_t id = 0;                     // chunkd: its id; metad: 0
  VolumeId volume{};  // in a client: all zero accepts any volume
  friend bool operator==(const ServerBinding&, const ServerBinding&) = default;
};
// "chunkd 3", "metad", "any server".
std::string DescribeServer(ServerBinding b);
bool IsZero(const VolumeId& v);
// 32 hex digits; "none" for all zero.
std::string VolumeIdHex(const VolumeId& v);

}  // namespace stripefs::rpc

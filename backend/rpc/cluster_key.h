// ClusterKey: the 32-byte secret shared by every stripefs process of a
// cluster, loaded from a key file made by `stripefs keygen FILE`.
//
// Every connection starts with a handshake in which both ends prove they
// hold this secret (HMAC-SHA256) and derive per-connection keys from it
// (HKDF-SHA256): "no key, no access" (session.h). A ClusterKey is immutable
// after Load/FromBytes and safe to share between threads (hold it in a
// shared_ptr<const ClusterKey>).
//
// A key also says how this process protects the frames of the connections
// it makes and accepts with it: authenticated only (the default), or secure
// (encrypted as well, session.h); WithSecureWire makes the secure copy.
//
// Key file rules: a regular file of exactly 32 bytes that neither group nor
// others may read or write (mode 0600 or stricter, as keygen writes it);
// Load refuses anything else with a message naming the fix.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stripefs::rpc {

inline constexpr size_t kClusterKeySize = 32;
inline constexpr size_t kMacSize = 32;  // HMAC-SHA256

using Mac = std::array<uint8_t, kMacSize>;

class ClusterKey {
 public:
  // Reads exactly 32 bytes from `path`. Errors name the file and the fix.
  static Result<std::shared_ptr<const ClusterKey>> Load(
      const std::string& path);
  // Writes 32 random bytes to `path` with mode 0600; EEXIST if it exists.
  static Status Generate(const std::string& path);
  static std::shared_ptr<const ClusterKey> FromBytes(
      std::span<const uint8_t, kClusterKeySize> bytes);

  // A copy of this key whose connections are encrypted (secure = true) or
  // authenticated only (false).
  std::shared_ptr<const ClusterKey> WithSecureWire(bool secure) const;
  bool secure_wire() const { return secure_wire_; }

  // HMAC-SHA256 with this key over the concatenation of `parts`.
  Mac Compute(std::span<const std::span<const uint8_t>> parts) const;
  // HKDF-SHA256 (RFC 5869) with this key as input keying material: fills
  // `out` (at most 255 * 32 bytes).
  void Derive(std::span<const uint8_t> salt, std::string_view info,
              std::span<uint8_t> out) const;

 private:
  std::array<uint8_t, kClusterKeySize> bytes_{};
  bool secure_wire_ = false;
};

// Constant-time comparison of two MACs.
bool MacEqual(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace stripefs::rpc

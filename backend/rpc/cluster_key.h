// ClusterKey: the 32-byte secret of one identity (identity.h). The server
// key is the file `stripefs keygen FILE` makes (32 raw bytes, identity
// "server", shared by chunkd, metad and server-side tools); an identity
// file made by `stripefs auth add` holds the derived key of "admin.NAME" or
// "client.NAME" with its name and salt (text, 0600; format in
// docs/cluster.md).
//
// Every connection starts with a handshake in which both ends prove they
// hold the key of the client's identity (HMAC-SHA256) and derive
// per-connection keys from it (HKDF-SHA256): "no key, no access"
// (session.h). A ClusterKey is immutable after Load/FromBytes and safe to
// share between threads (hold it in a shared_ptr<const ClusterKey>). It
// holds no heap memory (the server's handshake keeps one per pending
// connection).
//
// A key also says how this process protects the frames of the connections
// it makes and accepts with it: authenticated only (the default), or secure
// (encrypted as well, session.h); WithSecureWire makes the secure copy, and
// the identity keys a server derives from its key inherit its mode.
//
// Key file rules: a regular file (the 32-byte server key or an identity
// file) that neither group nor others may read or write (mode 0600 or
// stricter, as keygen and auth add write it); Load refuses anything else
// with a message naming the fix.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/rpc/identity.h"
#include "common/status.h"

namespace stripefs::rpc {

inline constexpr size_t kClusterKeySize = 32;
inline constexpr size_t kMacSize = 32;  // HMAC-SHA256

using Mac = std::array<uint8_t, kMacSize>;

class ClusterKey {
 public:
  // Reads the server key (exactly 32 bytes) or an identity file from
  // `path`. Errors name the file and the fix.
  static Result<std::shared_ptr<const ClusterKey>> Load(
      const std::string& path);
  // Writes 32 random bytes to `path` with mode 0600; EEXIST if it exists.
  static Status Generate(const std::string& path);
  // A server key ("server") with these bytes.
  static std::shared_ptr<const ClusterKey> FromBytes(
      std::span<const uint8_t, kClusterKeySize> bytes);

  // A copy of this key whose connections are encrypted (secure = true) or
  // authenticated only (false).
  std::shared_ptr<const ClusterKey> WithSecureWire(bool secure) const;
  bool secure_wire() const { return secure_wire_; }

  // The key of identity `entity` (admin.NAME / client.NAME, already checked
  // with ParseEntity) with `salt`, derived from this server key:
  // HMAC-SHA256(K, "stripefs identity key" || entity || salt). It has this
  // key's secure_wire().
  ClusterKey DeriveIdentity(std::string_view entity,
                            const EntitySalt& salt) const;
  // A new identity (fresh random salt); EINVAL for a bad name, EPERM when
  // this is not the server key.
  Result<ClusterKey> NewIdentity(std::string_view entity) const;
  // Writes this identity's file (mode 0600); EEXIST if `path` exists.
  Status SaveIdentity(const std::string& path) const;

  // This identity's key for `recipient` to unwrap (AuthAdd's reply): the
  // key XOR HKDF-SHA256(recipient's key, salt = this salt, info =
  // "stripefs identity wrap " + this name), so it crosses the wire only
  // as a one-time-pad ciphertext that only `recipient` can open.
  std::vector<uint8_t> WrapFor(const ClusterKey& recipient) const;
  // The inverse, run by `recipient` (*this): the identity `entity` with
  // `salt` and the wrapped key. EPROTO for a wrapped key of another size.
  Result<ClusterKey> Unwrap(std::string_view entity, const EntitySalt& salt,
                            std::span<const uint8_t> wrapped) const;

  std::string_view entity() const { return {name_.data(), name_len_}; }
  const EntitySalt& salt() const { return salt_; }
  Principal principal() const { return principal_; }

  // HMAC-SHA256 with this key over the concatenation of `parts`.
  Mac Compute(std::span<const std::span<const uint8_t>> parts) const;
  // HKDF-SHA256 (RFC 5869) with this key as input keying material: fills
  // `out` (at most 255 * 32 bytes).
  void Derive(std::span<const uint8_t> salt, std::string_view info,
              std::span<uint8_t> out) const;

 private:
  static Result<std::shared_ptr<const ClusterKey>> LoadIdentity(
      const std::string& path);

  std::array<uint8_t, kClusterKeySize> bytes_{};
  std::array<char, kEntityNameMax> name_{'s', 'e', 'r', 'v', 'e', 'r'};
  size_t name_len_ = kServerEntity.size();
  EntitySalt salt_{};
  Principal principal_ = Principal::kServer;
  bool secure_wire_ = false;
};

// Constant-time comparison of two MACs.
bool MacEqual(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace stripefs::rpc

// IdentityTable: metad's table of the admin and client identities that
// exist (docs/cluster.md "Identities"), its IdentityGate, and what each
// client may reach.
//
// An identity's key is derived from the server key and its salt
// (identity.h), so the table holds no secrets: name, salt, and the client's
// limits (read-only; the subtree, which MetaServiceServer enforces through
// subtree_guard.h). `stripefs auth add` adds a row with a fresh
// salt, `auth rm` removes it: from then on the identity's handshakes and,
// through the gate, every request of its open sessions are refused, with no
// restart. The server key ("server") is always admitted and has no row.
//
// Durability: every change rewrites the file (temporary file, fsync,
// rename, 0600) before it is acknowledged. One file per metad: several
// metads serving one etcd volume each keep their own (a known limit).
// Thread-safety: all methods may be called concurrently (a shared_mutex;
// Admit takes it shared, once per request).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "backend/rpc/identity.h"
#include "common/status.h"

namespace stripefs::rpc {

struct IdentityRecord {
  std::string entity;      // admin.NAME / client.NAME
  std::string path = "/";  // subtree a client was given (--path)
  bool read_only = false;  // client may send only non-mutating messages
  friend bool operator==(const IdentityRecord&,
                         const IdentityRecord&) = default;
};

class IdentityTable final : public IdentityGate {
 public:
  // Reads `file` (a missing file is an empty table, written on the first
  // add). EBADMSG naming the line for a malformed file.
  static Result<std::unique_ptr<IdentityTable>> Open(std::string file);

  // Adds `r` with `salt`. EEXIST if the name exists, EINVAL for a bad name
  // or path (absolute, no "..", no newline).
  Status Add(const IdentityRecord& r, const EntitySalt& salt);
  // ENOENT if absent. `removed_salt`: the removed row's salt.
  Status Remove(const std::string& entity, EntitySalt* removed_salt = nullptr);
  std::vector<IdentityRecord> List() const;
  // The row of the identity `caller` proved (name and salt match), if any.
  std::optional<IdentityRecord> Find(const Caller& caller) const;
  // "server": OK. Others: OK when Find() has a row, else EKEYREVOKED.
  Status Admit(const Caller& caller) const override;
  size_t size() const;

 private:
  explicit IdentityTable(std::string file) : file_(std::move(file)) {}
  struct Row {
    EntitySalt salt;
    IdentityRecord record;
  };
  Status SaveLocked() const;

  const std::string file_;
  mutable std::shared_mutex mu_;
  std::map<std::string, Row> rows_;  // guarded by mu_
};

}  // namespace stripefs::rpc

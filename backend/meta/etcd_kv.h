// The etcd engine of the KvStore seam: a volume's records in an etcd v3
// cluster (Raft-replicated), under one key prefix, reached over gRPC.
//
// A location is
//   etcds://host:port[,host:port...]/prefix?ca=F&cert=F&key=F[&timeout_ms=N]
// (TLS: the etcd members' CA, and the client certificate and key whose
// Common Name is the etcd user; etcd must run with --client-cert-auth and
// auth enabled, the user holding a role with readwrite on the prefix), or
//   etcd://host:port[,host:port...]/prefix[?timeout_ms=N]
// (plaintext, no user: refused unless the caller allows insecure etcd, and
// then only when every endpoint is a loopback address). docs/metadata.md,
// "etcd security". Every record key is stored as prefix + key, so one etcd
// holds many volumes, each reachable only with its own user's role. Any number
// of EtcdKv instances (in any processes) may use the same prefix at once:
// transactions are optimistic (etcd Txn comparing the mod revisions of what was
// read; see kv_store.h).
//
// Failover and time bounds: each call goes to one endpoint and moves to the
// next when that one is unreachable or has lost its leader, retrying until
// timeout_ms (default 10000) has passed; then it fails with ETIMEDOUT, never
// hangs. A commit whose answer was lost (e.g. the leader died mid-call) is
// resolved by reading back a marker key the transaction wrote, so a commit
// is never applied twice nor reported failed after it applied.
//
// Limits: a transaction holds at most 127 writes (etcd's default 128, one
// for the marker) and 128 compares; larger ones fail with EFBIG. Reads are
// paged (1000 keys per request), so a range of any size can be scanned.
//
// Built only when gRPC, protobuf and etcd's .proto files are found
// (CMake option STRIPEFS_ETCD); otherwise ConnectEtcd returns ENOTSUP with
// the reason. Thread-safety: as KvStore.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/meta/kv_store.h"
#include "common/status.h"

namespace stripefs {

inline constexpr std::string_view kEtcdScheme = "etcd://";
inline constexpr std::string_view kEtcdTlsScheme = "etcds://";

// PEM files of a TLS connection to etcd. The key must not be readable by
// group or others (ConnectEtcd refuses it, naming `chmod 600`).
struct EtcdTlsFiles {
  std::string ca;    // CA certificate(s) that signed the members' certs
  std::string cert;  // client certificate; its Common Name is the etcd user
  std::string key;   // its private key
};

struct EtcdLocation {
  std::vector<std::string> endpoints;  // host:port, at least one
  std::string prefix;                  // key prefix, not empty
  std::chrono::milliseconds timeout{10000};
  std::optional<EtcdTlsFiles> tls;  // set for etcds://
  // Set by the caller (a --etcd-insecure flag), never by the location text:
  // a plaintext etcd:// location may be used when every endpoint is a
  // loopback address.
  bool insecure_loopback_ok = false;
};

// True for "etcd://..." and "etcds://...".
bool IsEtcdLocationText(std::string_view location);

// Parses an etcd:// or etcds:// location (above); EINVAL naming the mistake
// otherwise (an etcds:// location needs all of ca, cert and key).
Result<EtcdLocation> ParseEtcdLocation(std::string_view location);

// The location as text (the inverse of ParseEtcdLocation; the prefix
// without its trailing '/').
std::string FormatEtcdLocation(const EtcdLocation& where);

// Whether `where` may be used: EPERM with a one-line fix for a plaintext
// location without insecure_loopback_ok, or with it on a non-loopback
// endpoint. ConnectEtcd checks this first; cheap, no I/O.
Status CheckEtcdSecurity(const EtcdLocation& where);

// The contents of the PEM files (for gRPC's SslCredentials): ENOENT or
// EACCES naming the file that cannot be read, EPERM naming `chmod 600` for
// a key that group or others may read.
struct EtcdTlsPem {
  std::string ca, cert, key;
};
Result<EtcdTlsPem> ReadEtcdTlsFiles(const EtcdTlsFiles& files);

// Connects (lazily: the first call reaches out) to the etcd of `where`,
// after CheckEtcdSecurity and reading the TLS files (ENOENT/EACCES naming a
// missing or unreadable file, EPERM for a key others may read). A call that
// etcd refuses for want of permission fails with EACCES.
Result<std::unique_ptr<KvStore>> ConnectEtcd(const EtcdLocation& where);

// Why the etcd engine is not built, or empty if it is.
std::string_view EtcdEngineMissing();

}  // namespace stripefs

// RPC dispatch tables: one row per message a server answers (the model is
// fuse/opcode_table.cc and go-fuse's opcode.go). A row names the message,
// the handler that decodes and serves it (typed_call.h's ServeTyped with
// the message's wire struct), whether it changes state, and which
// identities may send it (identity.h). Dispatch() is the only code that
// reads the rows: it refuses a message the server does not serve and an
// identity the row does not list, and runs the handler otherwise. So an
// RPC is added by its wire struct (wire_messages.h), one row and its
// handler; nothing else keeps a list of messages.
//
// The tables are constant: thread-safe. Handlers run on the server's
// threads with the server object they were given.
#pragma once

#include <cstdint>
#include <exception>
#include <span>
#include <string>

#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/identity.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/typed_call.h"
#include "backend/rpc/wire_messages.h"

namespace stripefs::rpc {

// One request as a handler sees it.
struct RpcCall {
  const Caller& caller;
  std::span<const uint8_t> payload;
  AlignedBytes& bulk;  // may be moved from
  RpcReply* reply;
  // chunkd: the verified grants a client's request came with; every chunk
  // it names must be covered by one (null: the caller needs none).
  const GrantedCall* granted = nullptr;
};

inline constexpr Principals kAnyone =
    Principal::kServer | Principal::kAdmin | Principal::kClient;
inline constexpr Principals kOperators = Principal::kServer | Principal::kAdmin;

template <typename Server>
struct RpcRow {
  MsgType type;
  void (*serve)(Server& server, const RpcCall& call);
  bool mutates;        // changes the cluster's state (a --read-only client
                       // may send only rows where this is false)
  Principals callers;  // who may send it
};

// The row of `type`, or null.
template <typename Server, size_t N>
constexpr const RpcRow<Server>* FindRow(const RpcRow<Server> (&rows)[N],
                                        uint16_t type) {
  for (const RpcRow<Server>& r : rows)
    if (static_cast<uint16_t>(r.type) == type) return &r;
  return nullptr;
}

// No message twice in one table.
template <typename Server, size_t N>
constexpr bool RowsUnique(const RpcRow<Server> (&rows)[N]) {
  for (size_t i = 0; i < N; ++i)
    for (size_t j = i + 1; j < N; ++j)
      if (rows[i].type == rows[j].type) return false;
  return true;
}

// EPERM naming the message, the caller and who may send it.
Status RefusedFor(const Caller& caller, uint16_t type, Principals callers);

// A server's further check of a caller against a row (metad: a read-only
// client may send only rows that do not mutate): OK or the refusal.
template <typename Server>
using RowPolicy = Status (*)(const Server& server, const Caller& caller,
                             const RpcRow<Server>& row);

// Serves one request with `rows`: EOPNOTSUPP "<role> does not serve X
// (<wrong_address_hint>)" for a message without a row, EPERM when the
// caller's principal is not in the row's callers, the policy's refusal,
// else the row's handler (an exception becomes an EIO "<role> internal
// error").
template <typename Server, size_t N>
void Dispatch(const RpcRow<Server> (&rows)[N], Server& server, const char* role,
              const char* wrong_address_hint, const RpcCall& call,
              uint16_t type, RowPolicy<Server> policy = nullptr) {
  const RpcRow<Server>* row = FindRow(rows, type);
  if (row == nullptr) {
    const char* name = MsgTypeName(type);
    call.reply->payload = EncodeErrorResponse(Status::NotSupported(
        std::string(role) + " does not serve " +
        (name ? std::string(name) : "message type " + std::to_string(type)) +
        " (" + wrong_address_hint + ")"));
    return;
  }
  if (!Contains(row->callers, call.caller.principal)) {
    call.reply->payload =
        EncodeErrorResponse(RefusedFor(call.caller, type, row->callers));
    return;
  }
  if (policy) {
    Status refused = policy(server, call.caller, *row);
    if (!refused.ok()) {
      call.reply->payload = EncodeErrorResponse(refused);
      return;
    }
  }
  try {
    row->serve(server, call);
  } catch (const std::exception& e) {
    call.reply->payload = EncodeErrorResponse(
        Status::IoError(std::string(role) + " internal error: " + e.what()));
    call.reply->bulk = {};
    call.reply->bulk_storage.clear();
    call.reply->bulk_lease.reset();
  }
}

}  // namespace stripefs::rpc

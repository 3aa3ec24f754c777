// MetaInlineHandler: metad's RpcHandler with the inline policy. Wraps the
// handler that serves a MetaService (MetaServiceServer, or that wrapped in
// metrics) and answers RpcHandler::InlineSafe for each request from the
// service's MetaInlineCaps, asked per request:
//
//   inline when caps.reads:  Lookup, GetAttr, ReadLink, GetXattr, ListXattr,
//     GetGeometry, StatFs (point reads / the stats record), ReadDir of at
//     most kMaxInlineReadDirEntries, GetStripes of at most
//     kMaxInlineStripes (bounded range reads).
//   inline when caps.namespace_writes:  MkNode, Mkdir, Symlink, Link,
//     Unlink, Rmdir, Rename, SetXattr, RemoveXattr, SetAttr without a size
//     change (acknowledged before their WAL sync; one short transaction).
//   never:  everything that waits for a WAL sync (stripe commits, version
//     reservations, truncating SetAttr, server records, Sync), that may be
//     large (GetClusterMap, ListStripes, ListOrphans, ListOrphanStripes,
//     PurgeInode(s), DropStripes), the client table, and any request that
//     does not decode (the worker answers its error).
//
// Ownership: borrows `inner` and `service` (both outlive the server).
// Thread-safety: as `inner`; InlineSafe is const and lock-free apart from
// the service's InlineCapabilities().
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "backend/meta/meta_service.h"
#include "backend/rpc/rpc_server.h"

namespace stripefs::rpc {

// Bounds of the range reads that may run inline (a ReadDir page costs one
// point read per entry).
inline constexpr uint32_t kMaxInlineReadDirEntries = 512;
inline constexpr uint64_t kMaxInlineStripes = 64;

class MetaInlineHandler final : public RpcHandler {
 public:
  MetaInlineHandler(RpcHandler* inner, const MetaService* service)
      : inner_(inner), service_(service) {}
  std::string Role() const override { return inner_->Role(); }
  void Handle(const rpc::Caller& caller, uint16_t type,
              std::span<const uint8_t> payload, AlignedBytes& bulk,
              RpcReply* reply) override {
    inner_->Handle(caller, type, payload, bulk, reply);
  }
  bool InlineSafe(uint16_t type,
                  std::span<const uint8_t> payload) const override;

 private:
  // Asked only for the request types that can run inline: the write check
  // reads engine properties, which the other types need not pay for.
  MetaInlineCaps Caps() const { return service_->InlineCapabilities(); }

  RpcHandler* const inner_;
  const MetaService* const service_;
};

}  // namespace stripefs::rpc

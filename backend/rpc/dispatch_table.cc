#include "backend/rpc/dispatch_table.h"

namespace stripefs::rpc {

Status RefusedFor(const Caller& caller, uint16_t type, Principals callers) {
  std::string who;
  for (Principal p :
       {Principal::kServer, Principal::kAdmin, Principal::kClient}) {
    if (!Contains(callers, p)) continue;
    if (!who.empty()) who += " or ";
    who += PrincipalName(p);
  }
  const char* name = MsgTypeName(type);
  return Status(EPERM, std::string(name ? name : "this message") +
                           " may be sent by the " + who +
                           " identity only, not by " + caller.entity +
                           " (use the admin or server key for cluster "
                           "operations; docs/cluster.md \"Identities\")");
}

}  // namespace stripefs::rpc

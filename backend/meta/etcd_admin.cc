// etcd administration over etcd v3's Auth and Maintenance services.
#include "backend/meta/etcd_admin.h"

#include <thread>

#include "backend/meta/etcd_grpc.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace stripefs {

namespace {

namespace pb = etcdserverpb;
using Clock = std::chrono::system_clock;

// One call on the Auth service, moving along the endpoints while they are
// unreachable. `already` is an error message that means "done before"
// (idempotent setup), or "".
template <typename Req, typename Resp>
Status AuthCall(const EtcdAdminTarget& t,
                grpc::Status (pb::Auth::Stub::*method)(grpc::ClientContext*,
                                                       const Req&, Resp*),
                const Req& req, std::string_view what,
                std::string_view already = {}) {
  if (t.endpoints.empty())
    return Status::InvalidArgument("etcd administration without endpoints");
  STRIPEFS_ASSIGN_OR_RETURN(EtcdTlsPem pem, ReadEtcdTlsFiles(t.tls));
  const auto deadline = Clock::now() + t.timeout;
  grpc::Status last;
  for (size_t i = 0;; ++i) {
    auto stub = pb::Auth::NewStub(
        EtcdChannel(t.endpoints[i % t.endpoints.size()], pem));
    grpc::ClientContext ctx;
    ctx.set_deadline(
        std::min(deadline, Clock::now() + std::chrono::milliseconds(2000)));
    Resp resp;
    last = (stub.get()->*method)(&ctx, req, &resp);
    if (last.ok()) return Status::Ok();
    if (!already.empty() &&
        last.error_message().find(already) != std::string::npos)
      return Status::Ok();
    if (!EtcdRetryable(last)) break;
    if (Clock::now() >= deadline)
      return Status(ETIMEDOUT, std::string(what) +
                                   ": no etcd member answered "
                                   "within " +
                                   std::to_string(t.timeout.count()) +
                                   " ms: " + last.error_message());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (last.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
      last.error_code() == grpc::StatusCode::UNAUTHENTICATED)
    return Status::PermissionDenied(
        std::string(what) + ": " + last.error_message() + " (needs the " +
        std::string(kEtcdRootUser) + " user's certificate, " + t.tls.cert +
        " is not)");
  return Status::IoError(std::string(what) + ": " + last.error_message());
}

}  // namespace

Status EtcdEnableAuth(const EtcdAdminTarget& root) {
  const std::string name(kEtcdRootUser);
  pb::AuthUserAddRequest user;
  user.set_name(name);
  user.mutable_options()->set_no_password(true);
  STRIPEFS_RETURN_IF_ERROR(AuthCall(root, &pb::Auth::Stub::UserAdd, user,
                                    "adding etcd user root",
                                    "user name already exists"));
  pb::AuthRoleAddRequest role;
  role.set_name(name);
  STRIPEFS_RETURN_IF_ERROR(AuthCall(root, &pb::Auth::Stub::RoleAdd, role,
                                    "adding etcd role root",
                                    "role name already exists"));
  pb::AuthUserGrantRoleRequest grant;
  grant.set_user(name);
  grant.set_role(name);
  STRIPEFS_RETURN_IF_ERROR(AuthCall(root, &pb::Auth::Stub::UserGrantRole, grant,
                                    "granting etcd role root"));
  return AuthCall(root, &pb::Auth::Stub::AuthEnable, pb::AuthEnableRequest(),
                  "enabling etcd authentication");
}

Status EtcdGrantPrefix(const EtcdAdminTarget& root, const std::string& user,
                       const std::string& prefix) {
  if (user.empty() || prefix.empty() || user == kEtcdRootUser)
    return Status::InvalidArgument(
        "an etcd volume user needs a name other than root and a prefix");
  pb::AuthRoleAddRequest role;
  role.set_name(user);
  STRIPEFS_RETURN_IF_ERROR(AuthCall(root, &pb::Auth::Stub::RoleAdd, role,
                                    "adding etcd role " + user,
                                    "role name already exists"));
  pb::AuthRoleGrantPermissionRequest perm;
  perm.set_name(user);
  perm.mutable_perm()->set_permtype(authpb::Permission::READWRITE);
  perm.mutable_perm()->set_key(prefix);
  perm.mutable_perm()->set_range_end(EtcdPrefixEnd(prefix));
  STRIPEFS_RETURN_IF_ERROR(
      AuthCall(root, &pb::Auth::Stub::RoleGrantPermission, perm,
               "granting etcd role " + user + " " + prefix));
  pb::AuthUserAddRequest add;
  add.set_name(user);
  add.mutable_options()->set_no_password(true);
  STRIPEFS_RETURN_IF_ERROR(AuthCall(root, &pb::Auth::Stub::UserAdd, add,
                                    "adding etcd user " + user,
                                    "user name already exists"));
  pb::AuthUserGrantRoleRequest grant;
  grant.set_user(user);
  grant.set_role(user);
  return AuthCall(root, &pb::Auth::Stub::UserGrantRole, grant,
                  "granting etcd user " + user + " its role");
}

Result<EtcdMemberState> EtcdMemberStatus(const std::string& endpoint,
                                         const EtcdTlsFiles& tls,
                                         std::chrono::milliseconds timeout) {
  STRIPEFS_ASSIGN_OR_RETURN(EtcdTlsPem pem, ReadEtcdTlsFiles(tls));
  auto stub = pb::Maintenance::NewStub(EtcdChannel(endpoint, pem));
  grpc::ClientContext ctx;
  ctx.set_deadline(Clock::now() + timeout);
  pb::StatusResponse resp;
  grpc::Status st = stub->Status(&ctx, pb::StatusRequest(), &resp);
  if (!st.ok()) {
    return Status(EtcdRetryable(st) ? EHOSTDOWN : EIO,
                  "etcd at " + endpoint + ": " + st.error_message());
  }
  EtcdMemberState out;
  out.member_id = resp.header().member_id();
  out.leader = out.member_id != 0 && resp.leader() == out.member_id;
  out.raft_term = resp.raftterm();
  out.version = resp.version();
  return out;
}

}  // namespace stripefs

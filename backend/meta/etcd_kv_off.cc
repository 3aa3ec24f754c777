// The etcd engine when the build has no gRPC/protobuf/etcd protos.
#include "backend/meta/etcd_admin.h"
#include "backend/meta/etcd_kv.h"

namespace stripefs {

std::string_view EtcdEngineMissing() { return STRIPEFS_ETCD_MISSING; }

Result<std::unique_ptr<KvStore>> ConnectEtcd(const EtcdLocation&) {
  return Status::NotSupported(
      "this stripefs was built without the etcd metadata engine (" +
      std::string(EtcdEngineMissing()) +
      "); run scripts/install-deps.sh and rebuild");
}

namespace {
Status Missing() {
  return Status::NotSupported(
      "this stripefs was built without the etcd metadata engine (" +
      std::string(EtcdEngineMissing()) +
      "); run scripts/install-deps.sh and rebuild");
}
}  // namespace

Status EtcdEnableAuth(const EtcdAdminTarget&) { return Missing(); }
Status EtcdGrantPrefix(const EtcdAdminTarget&, const std::string&,
                       const std::string&) {
  return Missing();
}
Result<EtcdMemberState> EtcdMemberStatus(const std::string&,
                                         const EtcdTlsFiles&,
                                         std::chrono::milliseconds) {
  return Missing();
}

}  // namespace stripefs

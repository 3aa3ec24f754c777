#include "backend/meta/etcd_command.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/unique_fd.h"

namespace stripefs {

std::vector<std::string> EtcdMemberArgs(const EtcdMemberSpec& spec) {
  std::vector<std::string> args = {spec.binary,
                                   "--name",
                                   spec.name,
                                   "--data-dir",
                                   spec.data_dir,
                                   "--listen-client-urls",
                                   spec.client_url,
                                   "--advertise-client-urls",
                                   spec.client_url,
                                   "--listen-peer-urls",
                                   spec.peer_url,
                                   "--initial-advertise-peer-urls",
                                   spec.peer_url,
                                   "--initial-cluster",
                                   spec.initial_cluster,
                                   "--initial-cluster-state",
                                   "new",
                                   "--initial-cluster-token",
                                   spec.cluster_token,
                                   "--heartbeat-interval",
                                   "200",
                                   "--election-timeout",
                                   "2000",
                                   "--log-level",
                                   "warn"};
  if (!spec.cert_file.empty()) {
    args.insert(
        args.end(),
        {"--cert-file", spec.cert_file, "--key-file", spec.key_file,
         "--trusted-ca-file", spec.ca_file, "--client-cert-auth",
         "--peer-cert-file", spec.cert_file, "--peer-key-file", spec.key_file,
         "--peer-trusted-ca-file", spec.ca_file, "--peer-client-cert-auth",
         "--peer-cert-allowed-cn", spec.peer_common_name});
  }
  return args;
}

Result<std::string> FreeLoopbackAddress() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::FromErrno(errno, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return Status::FromErrno(errno, "bind a loopback port");
  }
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

}  // namespace stripefs

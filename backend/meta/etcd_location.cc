#include <charconv>

#include "backend/meta/etcd_kv.h"

namespace stripefs {

Result<EtcdLocation> ParseEtcdLocation(std::string_view location) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(
        "bad etcd location '" + std::string(location) +
        "': " + std::string(why) +
        " (expected etcd://host:port[,host:port...]/prefix[?timeout_ms=N])");
  };
  if (!location.starts_with(kEtcdScheme)) return bad("no etcd:// scheme");
  std::string_view rest = location.substr(kEtcdScheme.size());
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return bad("no /prefix");
  EtcdLocation out;
  std::string_view hosts = rest.substr(0, slash);
  std::string_view path = rest.substr(slash + 1);
  while (!hosts.empty()) {
    size_t comma = hosts.find(',');
    std::string_view h = hosts.substr(0, comma);
    if (h.empty() || h.find(':') == std::string_view::npos) {
      return bad("endpoint '" + std::string(h) + "' is not host:port");
    }
    out.endpoints.emplace_back(h);
    hosts = comma == std::string_view::npos ? std::string_view()
                                            : hosts.substr(comma + 1);
  }
  if (out.endpoints.empty()) return bad("no endpoint");
  size_t q = path.find('?');
  if (q != std::string_view::npos) {
    std::string_view opt = path.substr(q + 1);
    path = path.substr(0, q);
    constexpr std::string_view kTimeout = "timeout_ms=";
    if (!opt.starts_with(kTimeout)) return bad("unknown option");
    std::string_view num = opt.substr(kTimeout.size());
    int64_t ms = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), ms);
    if (ec != std::errc() || p != num.data() + num.size() || ms <= 0) {
      return bad("timeout_ms must be a positive number");
    }
    out.timeout = std::chrono::milliseconds(ms);
  }
  if (path.empty()) return bad("empty prefix");
  out.prefix = std::string(path) + "/";
  return out;
}

}  // namespace stripefs

// etcd locations: parsing, formatting and the plaintext policy (no gRPC:
// built with or without the etcd engine).
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "backend/meta/etcd_admin.h"
#include "backend/meta/etcd_kv.h"
#include "common/unique_fd.h"

namespace stripefs {

namespace {

constexpr const char* kExpected =
    "expected etcds://host:port[,host:port...]/prefix?ca=FILE&cert=FILE&"
    "key=FILE[&timeout_ms=N] or etcd://host:port[,...]/prefix[?timeout_ms=N]";

// "host" of "host:port" ("[::1]:p" gives "::1").
std::string_view HostOf(std::string_view endpoint) {
  if (endpoint.starts_with("[")) {
    size_t close = endpoint.find(']');
    return close == std::string_view::npos ? endpoint
                                           : endpoint.substr(1, close - 1);
  }
  return endpoint.substr(0, endpoint.rfind(':'));
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, h.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

// The whole of a small file; `what` names it in errors.
Result<std::string> ReadSmallFile(const std::string& path, bool secret) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return Status::FromErrno(errno, "etcd TLS file " + path +
                                        " (give ca=, cert= and key= of an "
                                        "existing file)");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument("etcd TLS file " + path +
                                   " is not a regular file");
  if (secret && (st.st_mode & 077) != 0)
    return Status(
        EPERM, "etcd client key " + path +
                   " may be read by group or others; run `chmod 600 " + path +
                   "`");
  if (st.st_size > (1 << 20))
    return Status::InvalidArgument("etcd TLS file " + path +
                                   " is over 1 MiB; is it a PEM file?");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "read " + path);
    got += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace

bool IsEtcdLocationText(std::string_view location) {
  return location.starts_with(kEtcdScheme) ||
         location.starts_with(kEtcdTlsScheme);
}

Result<EtcdLocation> ParseEtcdLocation(std::string_view location) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(
        "bad etcd location '" + std::string(location) +
        "': " + std::string(why) + " (" + kExpected + ")");
  };
  const bool tls = location.starts_with(kEtcdTlsScheme);
  if (!tls && !location.starts_with(kEtcdScheme))
    return bad("no etcds:// or etcd:// scheme");
  std::string_view rest =
      location.substr((tls ? kEtcdTlsScheme : kEtcdScheme).size());
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
  EtcdTlsFiles files;
  size_t q = path.find('?');
  if (q != std::string_view::npos) {
    std::string_view opts = path.substr(q + 1);
    path = path.substr(0, q);
    while (!opts.empty()) {
      size_t amp = opts.find('&');
      std::string_view opt = opts.substr(0, amp);
      opts = amp == std::string_view::npos ? std::string_view()
                                           : opts.substr(amp + 1);
      size_t eq = opt.find('=');
      if (eq == std::string_view::npos)
        return bad("option '" + std::string(opt) + "' is not name=value");
      std::string_view name = opt.substr(0, eq), value = opt.substr(eq + 1);
      if (name == "timeout_ms") {
        int64_t ms = 0;
        auto [p, ec] =
            std::from_chars(value.data(), value.data() + value.size(), ms);
        if (ec != std::errc() || p != value.data() + value.size() || ms <= 0) {
          return bad("timeout_ms must be a positive number");
        }
        out.timeout = std::chrono::milliseconds(ms);
      } else if (name == "ca" || name == "cert" || name == "key") {
        if (!tls) return bad(std::string(name) + "= needs etcds://");
        if (value.empty()) return bad(std::string(name) + "= is empty");
        (name == "ca"     ? files.ca
         : name == "cert" ? files.cert
                          : files.key) = std::string(value);
      } else {
        return bad("unknown option '" + std::string(name) + "'");
      }
    }
  }
  if (path.empty()) return bad("empty prefix");
  if (tls) {
    if (files.ca.empty() || files.cert.empty() || files.key.empty())
      return bad("etcds:// needs ca=, cert= and key=");
    out.tls = files;
  }
  out.prefix = std::string(path) + "/";
  return out;
}

std::string FormatEtcdLocation(const EtcdLocation& where) {
  std::string out(where.tls ? kEtcdTlsScheme : kEtcdScheme);
  for (size_t i = 0; i < where.endpoints.size(); ++i)
    out += (i ? "," : "") + where.endpoints[i];
  out += "/" + where.prefix.substr(0, where.prefix.size() - 1);
  std::string opts;
  if (where.tls)
    opts = "ca=" + where.tls->ca + "&cert=" + where.tls->cert +
           "&key=" + where.tls->key;
  if (where.timeout != std::chrono::milliseconds(10000))
    opts += (opts.empty() ? "" : "&") + std::string("timeout_ms=") +
            std::to_string(where.timeout.count());
  return opts.empty() ? out : out + "?" + opts;
}

Status CheckEtcdSecurity(const EtcdLocation& where) {
  if (where.tls) return Status::Ok();
  std::string eps;
  for (const std::string& e : where.endpoints)
    eps += (eps.empty() ? "" : ",") + e;
  if (!where.insecure_loopback_ok)
    return Status(
        EPERM,
        "etcd at " + eps +
            " would be reached without TLS or a user, so anyone who reaches it "
            "could rewrite the volume; use etcds://...?ca=&cert=&key= "
            "(docs/metadata.md, \"etcd security\"), or --etcd-insecure for an "
            "etcd on loopback");
  for (const std::string& e : where.endpoints)
    if (!IsLoopbackHost(HostOf(e)))
      return Status(
          EPERM, "--etcd-insecure is for an etcd on loopback only, and " + e +
                     " is not; reach it with etcds://...?ca=&cert=&key= "
                     "(docs/metadata.md, \"etcd security\")");
  return Status::Ok();
}

Result<EtcdTlsPem> ReadEtcdTlsFiles(const EtcdTlsFiles& files) {
  EtcdTlsPem pem;
  STRIPEFS_ASSIGN_OR_RETURN(pem.ca, ReadSmallFile(files.ca, false));
  STRIPEFS_ASSIGN_OR_RETURN(pem.cert, ReadSmallFile(files.cert, false));
  STRIPEFS_ASSIGN_OR_RETURN(pem.key, ReadSmallFile(files.key, true));
  return pem;
}

std::string EtcdPrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff)
    end.pop_back();
  if (end.empty()) return std::string(1, '\0');  // every key
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

}  // namespace stripefs

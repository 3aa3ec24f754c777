#include "metrics/scrape.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/unique_fd.h"

namespace stripefs::metrics {
namespace {

using Clock = std::chrono::steady_clock;

// Waits for `events` on fd until `until`; ETIMEDOUT past it.
Status WaitFor(int fd, short events, Clock::time_point until) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - Clock::now());
    if (left.count() <= 0) return Status(ETIMEDOUT, "no answer in time");
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return Status::Ok();
    if (n < 0 && errno != EINTR) return Status::FromErrno(errno, "poll");
  }
}

// The series name of a key: up to '{'.
std::string_view NameOf(std::string_view key) {
  return key.substr(0, key.find('{'));
}

}  // namespace

Result<std::string> Scrape(const std::string& address,
                           std::chrono::milliseconds timeout) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidArgument("metrics address '" + address +
                                   "': expected HOST:PORT");
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return Status(EHOSTUNREACH, "resolve " + address + ": " + gai_strerror(rc));
  UniqueFd fd(::socket(res->ai_family,
                       res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int err = fd.get() < 0 ? errno : 0;
  if (!err && ::connect(fd.get(), res->ai_addr, res->ai_addrlen) != 0 &&
      errno != EINPROGRESS)
    err = errno;
  ::freeaddrinfo(res);
  if (err) return Status::FromErrno(err, "connect to " + address);
  const auto until = Clock::now() + timeout;
  std::string req = "GET /metrics HTTP/1.0\r\nHost: " + address + "\r\n\r\n";
  size_t sent = 0;
  while (sent < req.size()) {
    STRIPEFS_RETURN_IF_ERROR(
        WaitFor(fd.get(), POLLOUT, until).Annotate("send to " + address));
    ssize_t n =
        ::send(fd.get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return Status::FromErrno(errno, "send to " + address);
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string resp;
  char buf[16384];
  for (;;) {
    STRIPEFS_RETURN_IF_ERROR(
        WaitFor(fd.get(), POLLIN, until).Annotate("read from " + address));
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return Status::FromErrno(errno, "read from " + address);
    }
    if (resp.size() + static_cast<size_t>(n) > kMaxScrapeBytes)
      return Status(EMSGSIZE, address + " sent more than " +
                                  std::to_string(kMaxScrapeBytes) + " bytes");
    resp.append(buf, static_cast<size_t>(n));
  }
  if (resp.rfind("HTTP/1.", 0) != 0 || resp.size() < 12 ||
      resp.compare(9, 3, "200") != 0)
    return Status(EPROTO, address + " did not answer 200 OK: " +
                              resp.substr(0, resp.find('\r')));
  auto body = resp.find("\r\n\r\n");
  if (body == std::string::npos)
    return Status(EPROTO, address + " sent no HTTP body");
  return resp.substr(body + 4);
}

Exposition ParseExposition(std::string_view text) {
  Exposition e;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line[0] == '#') continue;
    // The value follows the last space outside the label braces.
    size_t close = line.rfind('}');
    size_t sp = line.find(' ', close == std::string_view::npos ? 0 : close);
    if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size()) {
      ++e.bad_lines;
      continue;
    }
    std::string_view key = line.substr(0, sp);
    const char c0 = key[0];  // a metric name starts [a-zA-Z_:]
    if (!(std::isalpha(static_cast<unsigned char>(c0)) || c0 == '_' ||
          c0 == ':')) {
      ++e.bad_lines;
      continue;
    }
    std::string_view val = line.substr(sp + 1);
    val = val.substr(0, val.find(' '));  // drop an optional timestamp
    std::string v(val);
    char* end = nullptr;
    errno = 0;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() ||
        (key.find('{') != std::string_view::npos &&
         close == std::string_view::npos)) {
      ++e.bad_lines;
      continue;
    }
    e.series[std::string(key)] = d;
  }
  return e;
}

double Exposition::Sum(std::string_view name) const {
  double sum = 0;
  for (auto it = series.lower_bound(name);
       it != series.end() && it->first.compare(0, name.size(), name) == 0;
       ++it) {
    if (NameOf(it->first) == name) sum += it->second;
  }
  return sum;
}

bool Exposition::Has(std::string_view name) const {
  for (auto it = series.lower_bound(name);
       it != series.end() && it->first.compare(0, name.size(), name) == 0;
       ++it) {
    if (NameOf(it->first) == name) return true;
  }
  return false;
}

}  // namespace stripefs::metrics

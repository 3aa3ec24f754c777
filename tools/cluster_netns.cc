#include "tools/cluster_netns.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/unique_fd.h"

namespace stripefs::tools {
namespace {

constexpr const char* kStateFile = "/netns.state";
constexpr const char* kAllocLock = "/run/stripefs-netns.lock";
constexpr uint32_t kSubnets = 512;     // /24s in 198.18.0.0/15
constexpr uint32_t kClientHost = 253;  // .254

bool Exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// Runs argv (no shell), stderr captured; the error names the command and
// the tool's first line of complaint.
Status RunTool(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd rd(pipefd[0]), wr(pipefd[1]);
  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno(errno, "fork");
  if (pid == 0) {
    ::dup2(wr.get(), 2);
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) ::dup2(null, 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec: %s\n", std::strerror(errno));
    ::_exit(127);
  }
  wr.Reset();
  std::string err;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(rd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    err.append(buf, static_cast<size_t>(n));
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return Status::Ok();
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  auto nl = err.find('\n');
  if (nl != std::string::npos) err.resize(nl);
  return Status::IoError("`" + cmd +
                         "` failed: " + (err.empty() ? "no message" : err));
}

// `ip [-n NS] ARGS...` / `tc [-n NS] ARGS...`; ns "" is our own namespace.
Status Ip(const std::string& ns, std::vector<std::string> args,
          const char* tool = "ip") {
  std::vector<std::string> argv = {tool};
  if (!ns.empty()) argv.insert(argv.end(), {"-n", ns});
  argv.insert(argv.end(), args.begin(), args.end());
  return RunTool(argv);
}
Status Tc(const std::string& ns, std::vector<std::string> args) {
  return Ip(ns, std::move(args), "tc");
}

std::string SubnetPrefix(uint32_t subnet) {  // "198.18.7."
  return "198." + std::to_string(18 + subnet / 256) + "." +
         std::to_string(subnet % 256) + ".";
}

// The /24s of 198.18.0.0/15 that addresses of our namespace use (other
// clusters' client links, or anything else someone put there).
std::vector<bool> UsedSubnets() {
  std::vector<bool> used(kSubnets, false);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return used;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    uint32_t ip =
        ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    if ((ip >> 17) == ((198u << 24 | 18u << 16) >> 17))
      used[(ip >> 8) & (kSubnets - 1)] = true;
  }
  ::freeifaddrs(list);
  return used;
}

std::string Burst(uint64_t bits_per_s) {
  // 1 ms worth of bytes, at least a 64 KiB GSO packet: tbf never has to
  // split a packet, and short bursts stay close to the rate.
  uint64_t bytes = std::max<uint64_t>(bits_per_s / 8 / 1000, 64 * 1024);
  return std::to_string(bytes) + "b";
}

}  // namespace

Result<uint64_t> ParseLinkRate(const std::string& rate) {
  size_t i = 0;
  while (i < rate.size() && std::isdigit(static_cast<unsigned char>(rate[i])))
    ++i;
  const std::string unit = rate.substr(i);
  uint64_t mult = unit == "bit"    ? 1
                  : unit == "kbit" ? 1000
                  : unit == "mbit" ? 1000 * 1000
                  : unit == "gbit" ? 1000 * 1000 * 1000
                                   : 0;
  constexpr uint64_t kMin = 8'000, kMax = 400'000'000'000;
  uint64_t n = 0;
  if (i > 0 && i <= 12) n = std::stoull(rate.substr(0, i));
  if (mult == 0 || n == 0 || n > kMax / mult || n * mult < kMin)
    return Status::InvalidArgument(
        "'" + rate +
        "' is not a link rate: give a tc rate between 8kbit and 400gbit "
        "such as 1gbit, 10gbit or 100mbit");
  return n * mult;
}

std::string NetnsUnsupportedReason() {
  if (::geteuid() != 0)
    return "network namespaces need root (CAP_NET_ADMIN): run as root or "
           "drop --netns";
  for (std::string tool : {"ip", "tc"}) {
    if (!Exists("/usr/sbin/" + tool) && !Exists("/sbin/" + tool))
      return "--netns needs iproute2's `" + tool +
             "` (apt-get install iproute2)";
  }
  return "";
}

std::string NetnsLayout::Namespace(uint32_t host) const {
  return "sfs-" + tag + (host == 0 ? "-m" : "-c" + std::to_string(host));
}
std::string NetnsLayout::HostAddress(uint32_t host) const {
  return SubnetPrefix(subnet) + std::to_string(host + 1);
}
std::string NetnsLayout::ClientAddress() const {
  return HostAddress(kClientHost);
}
std::string NetnsLayout::HubLink(uint32_t host) const {
  return "s" + tag + "-" + std::to_string(host);
}

std::optional<NetnsLayout> LoadNetnsLayout(const std::string& dir) {
  std::ifstream f(dir + kStateFile);
  std::string word;
  NetnsLayout l;
  if (!(f >> word) || word != "layout" ||
      !(f >> l.tag >> l.subnet >> l.servers) || l.subnet >= kSubnets)
    return std::nullopt;
  return l;
}

Result<std::unique_ptr<NetnsNetwork>> NetnsNetwork::Build(
    const std::string& dir, uint32_t servers, const NetnsOptions& o) {
  if (std::string why = NetnsUnsupportedReason(); !why.empty())
    return Status::NotSupported(why);
  if (servers > kNetnsMaxServers)
    return Status::InvalidArgument("--netns holds at most " +
                                   std::to_string(kNetnsMaxServers) +
                                   " servers (one /24); use fewer --servers");
  if (!o.link_rate.empty())
    STRIPEFS_RETURN_IF_ERROR(
        ParseLinkRate(o.link_rate).status().Annotate("--link-rate"));
  STRIPEFS_RETURN_IF_ERROR(TeardownNetns(dir));
  // Serialize picking a /24 with other clusters' `up` until our client
  // address holds it.
  UniqueFd lock(::open(kAllocLock, O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock.valid() || ::flock(lock.get(), LOCK_EX) != 0)
    return Status::FromErrno(errno, std::string("lock ") + kAllocLock);
  NetnsLayout l;
  l.tag = NetnsTag(dir);
  l.servers = servers;
  std::vector<bool> used = UsedSubnets();
  uint32_t first =
      static_cast<uint32_t>(std::stoul(l.tag, nullptr, 16)) % kSubnets;
  uint32_t i = 0;
  while (i < kSubnets && used[(first + i) % kSubnets]) ++i;
  if (i == kSubnets)
    return Status::NoSpace(
        "every /24 of 198.18.0.0/15 is in use: `stripefs cluster down` "
        "other --netns clusters first");
  l.subnet = (first + i) % kSubnets;
  std::unique_ptr<NetnsNetwork> n(new NetnsNetwork(dir, l));
  {
    std::ofstream f(dir + kStateFile, std::ios::trunc);
    f << "layout " << l.tag << " " << l.subnet << " " << l.servers << "\n";
    if (!f) return Status::IoError("cannot write " + dir + kStateFile);
  }
  STRIPEFS_RETURN_IF_ERROR(n->Make(o));
  return n;
}

NetnsNetwork::~NetnsNetwork() {
  if (keep_) return;
  Status s = TeardownNetns(dir_);
  if (!s.ok())
    std::fprintf(stderr, "cluster: undoing the network: %s\n",
                 s.ToString().c_str());
}

Status NetnsNetwork::Record(const std::string& line) {
  std::ofstream f(dir_ + kStateFile, std::ios::app);
  f << line << "\n";
  f.flush();
  if (!f) return Status::IoError("cannot append to " + dir_ + kStateFile);
  return Status::Ok();
}

Status NetnsNetwork::Make(const NetnsOptions& o) {
  const NetnsLayout& l = layout_;
  const std::string hub = l.HubNamespace();
  STRIPEFS_RETURN_IF_ERROR(Record("netns " + hub));
  STRIPEFS_RETURN_IF_ERROR(Ip("", {"netns", "add", hub}));
  STRIPEFS_RETURN_IF_ERROR(Ip(hub, {"link", "set", "lo", "up"}));
  STRIPEFS_RETURN_IF_ERROR(Ip(hub, {"link", "add", "br0", "type", "bridge"}));
  STRIPEFS_RETURN_IF_ERROR(Ip(hub, {"link", "set", "br0", "up"}));
  // The client link: our end gets the client address (and so the one
  // connected route to the /24); no IPv6, nothing else on it.
  STRIPEFS_RETURN_IF_ERROR(Record("link " + l.ClientLink()));
  STRIPEFS_RETURN_IF_ERROR(
      Ip("", {"link", "add", l.ClientLink(), "type", "veth", "peer", "name",
              l.ClientHubLink(), "netns", hub}));
  {
    std::ofstream v6("/proc/sys/net/ipv6/conf/" + l.ClientLink() +
                     "/disable_ipv6");
    v6 << "1\n";  // best effort: absent without IPv6
  }
  STRIPEFS_RETURN_IF_ERROR(
      Ip(hub, {"link", "set", l.ClientHubLink(), "master", "br0", "up"}));
  STRIPEFS_RETURN_IF_ERROR(Ip(
      "", {"addr", "add", l.ClientAddress() + "/24", "dev", l.ClientLink()}));
  STRIPEFS_RETURN_IF_ERROR(Ip("", {"link", "set", l.ClientLink(), "up"}));
  STRIPEFS_RETURN_IF_ERROR(LimitLink("", l.ClientLink(), o, false));
  STRIPEFS_RETURN_IF_ERROR(LimitLink(hub, l.ClientHubLink(), o, true));
  for (uint32_t h = 0; h <= l.servers; ++h) {
    STRIPEFS_RETURN_IF_ERROR(MakeHost(h));
    STRIPEFS_RETURN_IF_ERROR(LimitLink(l.Namespace(h), "eth0", o, false));
    STRIPEFS_RETURN_IF_ERROR(LimitLink(hub, l.HubLink(h), o, true));
  }
  return Status::Ok();
}

Status NetnsNetwork::MakeHost(uint32_t host) {
  const NetnsLayout& l = layout_;
  const std::string ns = l.Namespace(host), hub = l.HubNamespace();
  STRIPEFS_RETURN_IF_ERROR(Record("netns " + ns));
  STRIPEFS_RETURN_IF_ERROR(Ip("", {"netns", "add", ns}));
  STRIPEFS_RETURN_IF_ERROR(Ip(ns, {"link", "set", "lo", "up"}));
  STRIPEFS_RETURN_IF_ERROR(
      Ip(hub, {"link", "add", l.HubLink(host), "type", "veth", "peer", "name",
               "eth0", "netns", ns}));
  STRIPEFS_RETURN_IF_ERROR(
      Ip(hub, {"link", "set", l.HubLink(host), "master", "br0", "up"}));
  STRIPEFS_RETURN_IF_ERROR(
      Ip(ns, {"addr", "add", l.HostAddress(host) + "/24", "dev", "eth0"}));
  return Ip(ns, {"link", "set", "eth0", "up"});
}

Status NetnsNetwork::LimitLink(const std::string& ns, const std::string& dev,
                               const NetnsOptions& o, bool bridge_end) {
  const bool netem = bridge_end && !o.netem.empty();
  if (o.link_rate.empty() && !netem) return Status::Ok();
  STRIPEFS_RETURN_IF_ERROR(Record("qdisc " + (ns.empty() ? "-" : ns) + " " +
                                  dev + (netem ? " netem" : "") +
                                  (o.link_rate.empty() ? "" : " tbf")));
  std::vector<std::string> tbf;
  if (!o.link_rate.empty()) {
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t bps, ParseLinkRate(o.link_rate));
    tbf = {"tbf", "rate", o.link_rate, "burst", Burst(bps), "latency", "50ms"};
  }
  if (netem) {
    std::vector<std::string> args = {"qdisc", "add",    "dev", dev,
                                     "root",  "handle", "1:",  "netem"};
    std::istringstream words(o.netem);
    for (std::string w; words >> w;) args.push_back(w);
    Status s = Tc(ns, args);
    if (!s.ok() &&
        s.message().find("qdisc kind is unknown") != std::string::npos)
      return Status::NotSupported(
          "this kernel has no netem qdisc (sch_netem: \"Specified qdisc "
          "kind is unknown\"); drop --netem or load sch_netem");
    STRIPEFS_RETURN_IF_ERROR(s);
    if (tbf.empty()) return Status::Ok();
    std::vector<std::string> child = {"qdisc",  "add", "dev",    dev,
                                      "parent", "1:1", "handle", "10:"};
    child.insert(child.end(), tbf.begin(), tbf.end());
    return Tc(ns, child);
  }
  std::vector<std::string> root = {"qdisc", "add", "dev", dev, "root"};
  root.insert(root.end(), tbf.begin(), tbf.end());
  return Tc(ns, root);
}

Status TeardownNetns(const std::string& dir) {
  std::ifstream f(dir + kStateFile);
  if (!f) return Status::Ok();
  std::vector<std::string> namespaces, links;
  for (std::string line; std::getline(f, line);) {
    std::istringstream w(line);
    std::string kind, name;
    w >> kind >> name;
    if (kind == "netns") namespaces.push_back(name);
    if (kind == "link") links.push_back(name);
    // qdiscs go with their links and namespaces.
  }
  Status first;
  for (const auto& l : links) {
    if (!Exists("/sys/class/net/" + l)) continue;
    Status s = Ip("", {"link", "del", l});
    if (!s.ok() && first.ok()) first = s;
  }
  // Hosts first, the hub last: deleting a namespace destroys its veth ends,
  // and with them their peers.
  for (auto it = namespaces.rbegin(); it != namespaces.rend(); ++it) {
    if (!Exists("/run/netns/" + *it)) continue;
    Status s = Ip("", {"netns", "del", *it});
    if (!s.ok() && first.ok()) first = s;
  }
  if (!first.ok())
    return first.Annotate("removing the network of " + dir +
                          " (run `stripefs cluster down` again)");
  if (::unlink((dir + kStateFile).c_str()) != 0 && errno != ENOENT)
    return Status::FromErrno(errno, "unlink " + dir + kStateFile);
  return Status::Ok();
}

Status SetHostLink(const std::string& dir, uint32_t host, bool up) {
  auto l = LoadNetnsLayout(dir);
  if (!l)
    return Status::InvalidArgument(
        "the cluster in " + dir +
        " does not run in network namespaces: partition/heal need "
        "`stripefs cluster up --netns`");
  if (host > l->servers)
    return Status::InvalidArgument("no host " + std::to_string(host) +
                                   " in the cluster");
  return Ip(l->HubNamespace(),
            {"link", "set", l->HubLink(host), up ? "up" : "down"});
}

int EnterNetns(const char* name) {
  char path[256] = "/run/netns/";
  std::strncat(path, name, sizeof(path) - std::strlen(path) - 1);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::setns(fd, CLONE_NEWNET);
  int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace stripefs::tools

// Hosts as network namespaces for `stripefs cluster up --netns`: metad and
// every chunkd get a namespace of their own ("sfs-<tag>-m", "sfs-<tag>-c<N>",
// tag = 8 hex digits of a hash of the cluster dir), each joined by a veth
// pair to a bridge in a hub namespace ("sfs-<tag>-hub"). The namespace that
// runs `cluster up` (where tests and mounts run) joins the same bridge
// through one more veth pair, whose root end ("s<tag>-cl") is the only thing
// made outside the new namespaces: it carries the cluster's client address
// and with it the one connected route to the cluster's /24.
//
// Addresses come from 198.18.0.0/15 only: one free /24 per cluster
// (198.18.0.0/24 .. 198.19.255.0/24, picked from the tag, the next free one
// on a clash), metad .1, chunkd N .N+1, the client .254.
//
// Every object is recorded in D/netns.state BEFORE it is made, so
// TeardownNetns removes all of it also after a failed or killed `up`
// (idempotent: what is gone already is skipped). Rate limits (tc tbf) sit on
// both ends of every host link; netem on the bridge end only, so a packet
// meets one netem per one-way trip. Needs root and iproute2 (`ip`, `tc`).
// Not thread-safe: one `stripefs cluster` command at a time per cluster dir;
// picking a /24 is serialized across clusters by a lock file in /run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace stripefs::tools {

// The tag of the cluster in `dir` (its absolute path): 8 hex digits of
// its FNV-1a hash. Its namespaces are "sfs-<tag>-*".
inline std::string NetnsTag(const std::string& dir) {
  uint32_t h = 2166136261u;
  for (unsigned char c : dir) h = (h ^ c) * 16777619u;
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", h);
  return buf;
}

struct NetnsOptions {
  std::string link_rate;  // tc rate ("1gbit", "100mbit"); "": unlimited
  std::string netem;      // tc netem arguments ("delay 1ms"); "": none
};

// Parses a --link-rate ("10gbit", "500mbit", "100kbit", "1000000bit") into
// bits per second; a one-line error naming the fix otherwise.
Result<uint64_t> ParseLinkRate(const std::string& rate);

// "" when namespaces can be made here (root, `ip` and `tc` present), else
// why not, naming the fix.
std::string NetnsUnsupportedReason();

// Names and addresses of one cluster's hosts. Host 0 is metad, host N
// chunkd N.
struct NetnsLayout {
  std::string tag;      // 8 hex digits
  uint32_t subnet = 0;  // index of the /24 in 198.18.0.0/15, 0..511
  uint32_t servers = 0;

  std::string HubNamespace() const { return "sfs-" + tag + "-hub"; }
  std::string Namespace(uint32_t host) const;
  std::string HostAddress(uint32_t host) const;  // "198.18.x.y"
  std::string ClientAddress() const;
  std::string HubLink(uint32_t host) const;  // bridge end, in the hub
  std::string ClientLink() const { return "s" + tag + "-cl"; }  // root end
  std::string ClientHubLink() const { return "s" + tag + "-hub"; }
};

// The largest cluster a /24 holds (metad .1, client .254).
inline constexpr uint32_t kNetnsMaxServers = 252;

// D/netns.state's layout; nullopt when the cluster does not use namespaces
// (no state file).
std::optional<NetnsLayout> LoadNetnsLayout(const std::string& dir);

// The network of one `cluster up --netns` while it is being made: owns
// everything made so far and removes it on destruction unless Keep() was
// called (a failed `up` leaves nothing behind).
class NetnsNetwork {
 public:
  // Removes leftovers recorded in D/netns.state, then makes the hub, the
  // client link and `servers` + 1 hosts, with the qdiscs of `o`.
  static Result<std::unique_ptr<NetnsNetwork>> Build(const std::string& dir,
                                                     uint32_t servers,
                                                     const NetnsOptions& o);
  ~NetnsNetwork();
  NetnsNetwork(const NetnsNetwork&) = delete;
  NetnsNetwork& operator=(const NetnsNetwork&) = delete;

  const NetnsLayout& layout() const { return layout_; }
  // The network outlives this object (until `cluster down`).
  void Keep() { keep_ = true; }

 private:
  NetnsNetwork(std::string dir, NetnsLayout l)
      : dir_(std::move(dir)), layout_(std::move(l)) {}
  Status Make(const NetnsOptions& o);
  Status MakeHost(uint32_t host);
  Status LimitLink(const std::string& ns, const std::string& dev,
                   const NetnsOptions& o, bool bridge_end);
  Status Record(const std::string& line);

  std::string dir_;
  NetnsLayout layout_;
  bool keep_ = false;
};

// Removes every namespace, link and qdisc recorded in D/netns.state, then
// the file. Ok when there is none. Stop the daemons first.
Status TeardownNetns(const std::string& dir);

// Partition (up=false) or heal (up=true) host `host`: sets the bridge end
// of its link down or up. Its processes keep running, unreachable.
Status SetHostLink(const std::string& dir, uint32_t host, bool up);

// In a forked child before exec: moves the calling thread into network
// namespace `name`. Returns errno (0 on success); async-signal-safe.
int EnterNetns(const char* name);

}  // namespace stripefs::tools

#include "backend/rpc/client_table.h"

#include <algorithm>

namespace stripefs::rpc {
namespace {

bool KnownKind(const std::string& k) {
  return k == "mount" || k == "repair" || k == "scrub";
}

uint64_t MillisBetween(ClientTable::Clock::time_point from,
                       ClientTable::Clock::time_point to) {
  if (to <= from) return 0;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

}  // namespace

Status ClientTable::Heartbeat(const ClientRecord& in) {
  if (!KnownKind(in.kind)) {
    return Status::InvalidArgument("unknown client kind '" +
                                   in.kind.substr(0, kMaxText) +
                                   "' (mount, repair or scrub)");
  }
  ClientRecord r = in;
  r.description.resize(std::min(r.description.size(), kMaxText));
  r.lease_ms = std::clamp(r.lease_ms, kMinLeaseMs, kMaxLeaseMs);
  r.age_ms = 0;
  const Clock::time_point now = Now();
  MutexLock lock(&mu_);
  Expire(now);
  if (r.finished) {
    live_.erase(r.id);
    if (r.kind != "mount") last_done_[r.kind] = Entry{r, now};
    return Status::Ok();
  }
  if (!live_.count(r.id) && live_.size() >= kMaxClients) {
    return Status::NoSpace("metad already tracks " +
                           std::to_string(kMaxClients) + " clients");
  }
  live_[r.id] = Entry{r, now};
  return Status::Ok();
}

void ClientTable::Expire(Clock::time_point now) {
  std::erase_if(live_, [&](const auto& kv) {
    return MillisBetween(kv.second.last, now) > kv.second.record.lease_ms;
  });
}

std::vector<ClientRecord> ClientTable::List() {
  const Clock::time_point now = Now();
  MutexLock lock(&mu_);
  Expire(now);
  std::vector<ClientRecord> out;
  auto add = [&](const Entry& e) {
    out.push_back(e.record);
    out.back().age_ms = MillisBetween(e.last, now);
  };
  for (const auto& kv : live_) add(kv.second);
  for (const auto& kv : last_done_) add(kv.second);
  return out;
}

}  // namespace stripefs::rpc

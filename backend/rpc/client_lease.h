// ClientLease: keeps one client (a mount, a repair or scrub run) listed in
// metad's ClientTable: a background thread sends a ClientRecord every
// `interval` (lease = 3 intervals, so two lost heartbeats are tolerated),
// carrying the latest repair progress given to Update(). The destructor
// sends finished=true, so a clean exit leaves the table at once; a crashed
// client expires after its lease.
//
// Best effort by design: heartbeat failures (metad down, an older metad)
// never fail the client; `stripefs status` then undercounts until the next
// heartbeat that lands. Uses its own connection to metad (short timeouts).
// Thread-safety: Update() from any thread; one owner constructs/destroys.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend/rpc/client_table.h"
#include "backend/rpc/remote_meta_service.h"

namespace stripefs::rpc {

class ClientLease {
 public:
  // `kind` "mount" | "repair" | "scrub"; `description` says which (the
  // host, pid and mountpoint are added). The first heartbeat is sent before
  // the constructor returns.
  ClientLease(const std::string& meta_address,
              std::shared_ptr<const ClusterKey> key, std::string kind,
              const std::string& description,
              std::chrono::milliseconds interval = std::chrono::seconds(2));
  ~ClientLease();
  ClientLease(const ClientLease&) = delete;
  ClientLease& operator=(const ClientLease&) = delete;

  // Progress to send with the next heartbeat.
  void Update(const RepairReport& progress);

 private:
  void Loop();
  void Send(bool finished);

  RemoteMetaService meta_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  ClientRecord record_;    // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace stripefs::rpc

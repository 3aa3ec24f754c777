// `stripefs server-state --meta HOST:PORT --key FILE --id N --state
// up|down|out`: sets a chunk server's state in the cluster map (e.g. mark a
// dead server out so `stripefs repair` rebuilds its chunks elsewhere).
// Talks to metad alone: opening a whole volume would need k+m usable
// servers, so on a cluster of exactly k+m a server marked out could never be
// brought back. Single-threaded.
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_meta_service.h"
#include "tools/command.h"
#include "tools/option_ranges.h"
#include "tools/volume_flags.h"

namespace stripefs::tools {
namespace {

int RunServerState(const VolumeFlags& flags, uint32_t id,
                   const std::string& state_name) {
  static const std::map<std::string, ServerState> kStates = {
      {"up", ServerState::kUp},
      {"down", ServerState::kDown},
      {"out", ServerState::kOut}};
  auto it = kStates.find(state_name);
  if (it == kStates.end()) {
    std::fprintf(stderr, "stripefs: --state must be up, down or out\n");
    return 1;
  }
  if (flags.meta.empty() || flags.key_file.empty() || !flags.dir.empty()) {
    std::fprintf(stderr,
                 "stripefs: server-state needs --meta HOST:PORT and --key FILE "
                 "(an embedded volume has no chunk servers)\n");
    return 1;
  }
  auto key = rpc::ClusterKey::Load(flags.key_file);
  if (!key.ok()) {
    std::fprintf(stderr, "stripefs: %s\n", key.status().ToString().c_str());
    return 1;
  }
  rpc::RemoteMetaService meta(flags.meta, *key);
  Status s = meta.SetServerState(id, it->second);
  if (!s.ok()) {
    std::fprintf(stderr, "stripefs: setting server %u %s failed: %s\n", id,
                 state_name.c_str(), s.ToString().c_str());
    return 1;
  }
  std::printf("server %u marked %s\n", id, state_name.c_str());
  return 0;
}

CommandRegistration server_state_commands([](CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "server-state", "set a chunk server's state (up, down, out) in the map");
  auto flags = std::make_shared<VolumeFlags>();
  auto id = std::make_shared<uint32_t>(0);
  auto state = std::make_shared<std::string>();
  flags->AddTo(cmd);
  cmd->add_option("--id", *id, "chunk server id")
      ->required()
      ->check(InRange(kServerIdRange));
  cmd->add_option("--state", *state, "up, down or out")->required();
  cmd->callback(
      [flags, id, state] { ExitWith(RunServerState(*flags, *id, *state)); });
});

}  // namespace
}  // namespace stripefs::tools

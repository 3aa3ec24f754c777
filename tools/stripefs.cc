// `stripefs`: the one command-line entry point (mkfs, mount, stat, chunkd,
// metad, cluster, repair, scrub, bench ...). Subcommands live in cmd_*.cc.
#include <cstdio>

#include "tools/command.h"

namespace stripefs::tools {

std::vector<CommandRegistrar>& CommandRegistry() {
  static std::vector<CommandRegistrar> registry;
  return registry;
}

namespace {
int g_exit_code = 0;
}  // namespace

void ExitWith(int code) { g_exit_code = code; }
int ExitCode() { return g_exit_code; }

}  // namespace stripefs::tools

int main(int argc, char** argv) {
  CLI::App app{
      "stripefs: an erasure-coded distributed file system mounted through "
      "FUSE"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stripefs 0.1.0");
  for (auto& reg : stripefs::tools::CommandRegistry()) reg(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return stripefs::tools::ExitCode();
}

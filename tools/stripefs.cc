// `stripefs`: the one command-line entry point (mkfs, mount, stat, chunkd,
// metad, cluster, repair, scrub, bench ...). Subcommands live in cmd_*.cc.
#include <cstdio>
#include <string>

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

namespace {

// "stripefs mount" for the deepest subcommand the parser selected.
std::string CommandPath(const CLI::App* app) {
  std::string path = "stripefs";
  for (;;) {
    auto subs = app->get_subcommands();
    if (subs.empty()) return path;
    app = subs.front();
    path += " " + app->get_name();
  }
}

// CLI11 reports `stripefs frob` as a missing subcommand. Walk the leading
// words: the first that is not a subcommand of a command that needs one is
// named, with where to look. Empty when the words are fine.
std::string UnknownCommand(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  std::string path = "stripefs";
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    if (at->get_subcommands({}).empty()) return "";
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : at->get_subcommands({})) {
      if (sub->check_name(argv[i])) next = sub;
    }
    if (!next) {
      if (at->get_require_subcommand_min() == 0) return "";
      return "stripefs: unknown command '" + std::string(argv[i]) + "' for `" +
             path + "`; run `" + path + " --help` for the list of commands";
    }
    at = next;
    path += " " + at->get_name();
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 0 && stripefs::tools::IsMountHelperName(argv[0]))
    return stripefs::tools::MountHelperMain(argc, argv);
  CLI::App app{
      "stripefs: an erasure-coded distributed file system mounted through "
      "FUSE"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stripefs 0.1.0");
  for (auto& reg : stripefs::tools::CommandRegistry()) reg(app);
  // Parse errors are one line that says where the help is.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "stripefs: " + std::string(e.what()) + "; see `" + CommandPath(a) +
           " --help`\n";
  });
  if (std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "%s\n", unknown.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return stripefs::tools::ExitCode();
}

// Subcommand registry of the `stripefs` CLI.
//
// Each tools/cmd_*.cc file adds its subcommands to the CLI11 app from a
// static CommandRegistration object, so adding a command never edits main.
// Registration happens during static initialisation (single-threaded).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace stripefs::tools {

// Adds one or more subcommands to `app`. The callback set on a subcommand
// returns the process exit code through ExitWith().
using CommandRegistrar = std::function<void(CLI::App& app)>;

std::vector<CommandRegistrar>& CommandRegistry();

struct CommandRegistration {
  explicit CommandRegistration(CommandRegistrar r) {
    CommandRegistry().push_back(std::move(r));
  }
};

// Sets the exit code main() returns after the parsed subcommand ran.
void ExitWith(int code);
int ExitCode();

// mount(8) helper mode: installed as /sbin/mount.fuse.stripefs (a link to
// the binary), `stripefs` takes mount(8)'s arguments (cmd_mount.cc).
inline constexpr char kMountHelperName[] = "mount.fuse.stripefs";
bool IsMountHelperName(const char* argv0);
int MountHelperMain(int argc, char** argv);

}  // namespace stripefs::tools

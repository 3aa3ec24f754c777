// RunCommand: runs a shell command (/bin/sh -c) and returns its exit code
// and what it wrote to stdout (append " 2>&1" to get stderr too). For the
// CLI tests. Blocks until the command ends; thread-safe.
#pragma once

#include <string>

namespace stripefs::testing {

struct CommandOutput {
  int rc = -1;  // the exit code; -1 if it could not start or was killed
  std::string out;
};

CommandOutput RunCommand(const std::string& command);

}  // namespace stripefs::testing

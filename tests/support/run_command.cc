#include "tests/support/run_command.h"

#include <sys/wait.h>

#include <cstdio>

namespace stripefs::testing {

CommandOutput RunCommand(const std::string& command) {
  CommandOutput r;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace stripefs::testing

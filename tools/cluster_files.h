// Reading the small files a local cluster keeps in its directory
// (`stripefs cluster up --dir D`: D/metad.addr, D/metad.metrics,
// D/cluster.key ...), shared by `stripefs cluster` and `stripefs status`.
#pragma once

#include <fstream>
#include <string>

namespace stripefs::tools {

// First line of `path`, "" when it is missing or empty.
inline std::string ReadFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace stripefs::tools

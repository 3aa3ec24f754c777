// Reading the small files a local cluster keeps in its directory
// (`stripefs cluster up --dir D`: D/metad.addr, D/metad.metrics,
// D/cluster.key ...), shared by `stripefs cluster` and `stripefs status`.
// D/metad.addr lists every metad, one a line (several with the etcd
// engine); its first line alone is a working --meta too.
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

// D/metad.addr's lines joined with ',' (the form --meta takes), "" if none.
inline std::string MetaAddresses(const std::string& dir) {
  std::ifstream f(dir + "/metad.addr");
  std::string line, out;
  while (std::getline(f, line))
    if (!line.empty()) out += (out.empty() ? "" : ",") + line;
  return out;
}

}  // namespace stripefs::tools

// Mount option lists: each -o value is a comma-separated list ("nosuid,
// relatime"), and a mount may be given several. SplitOptionLists flattens
// them into single options in the order given, so "the last one wins" rules
// read the result front to back. Empty items ("a,,b", a trailing comma) are
// kept as empty strings: callers ignore them.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace stripefs {

inline std::vector<std::string> SplitOptionLists(
    const std::vector<std::string>& lists) {
  std::vector<std::string> out;
  for (const std::string& list : lists) {
    size_t start = 0;
    while (true) {
      const size_t comma = list.find(',', start);
      if (comma == std::string::npos) {
        out.push_back(list.substr(start));
        break;
      }
      out.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace stripefs

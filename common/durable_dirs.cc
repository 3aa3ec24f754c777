#include "common/durable_dirs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace stripefs {

Status FsyncDirectory(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "open directory " + path);
  if (::fsync(fd.get()) != 0) {
    return Status::FromErrno(errno, "fsync directory " + path);
  }
  return Status::Ok();
}

Status MakeDirsDurably(const std::string& dir, std::string_view what) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0) {
      if (errno == EEXIST) continue;
      return Status::FromErrno(
          errno, "cannot create " + std::string(what) + " " + part);
    }
    const size_t slash = part.find_last_of('/');
    const std::string parent = slash == std::string::npos
                                   ? "."
                                   : (slash == 0 ? "/" : part.substr(0, slash));
    Status st = FsyncDirectory(parent);
    if (!st.ok()) {
      return st.Annotate("making " + std::string(what) + " " + part +
                         " durable");
    }
  }
  return Status::Ok();
}

}  // namespace stripefs

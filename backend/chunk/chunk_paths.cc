#include "backend/chunk/chunk_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "common/unique_fd.h"

namespace stripefs::chunk_paths {
namespace {

bool ParseDec32(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

std::string HexShort(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%" PRIx64, v);
  return buf;
}

}  // namespace

bool ParseHex64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

std::string Hex16(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

std::string LegacyChunkPath(const std::string& data_dir, const ChunkId& id,
                            uint64_t version) {
  return data_dir + "/" + Hex16(id.inode) + "/" +
         HexShort(id.stripe >> kStripeBucketShift) + "/" + Hex16(id.stripe) +
         "." + std::to_string(id.index) + "." + Hex16(version);
}

bool ParseLegacyChunkFileName(std::string_view name, uint64_t* stripe,
                              uint32_t* index, uint64_t* version) {
  size_t a = name.find('.');
  if (a == std::string_view::npos) return false;
  size_t b = name.find('.', a + 1);
  if (b == std::string_view::npos) return false;
  return name.size() - b - 1 == 16 && a == 16 &&
         ParseHex64(name.substr(0, a), stripe) &&
         ParseDec32(name.substr(a + 1, b - a - 1), index) &&
         ParseHex64(name.substr(b + 1), version);
}

std::string SegmentFileName(uint64_t seq) {
  return Hex16(seq) + kSegmentSuffix;
}

namespace {
bool ParseHexWithSuffix(std::string_view name, std::string_view suffix,
                        uint64_t* n) {
  return name.size() == 16 + suffix.size() && name.substr(16) == suffix &&
         ParseHex64(name.substr(0, 16), n);
}
}  // namespace

bool ParseSegmentFileName(std::string_view name, uint64_t* seq) {
  return ParseHexWithSuffix(name, kSegmentSuffix, seq);
}

std::string SpareFileName(uint64_t n) { return Hex16(n) + kSpareSuffix; }

bool ParseSpareFileName(std::string_view name, uint64_t* n) {
  return ParseHexWithSuffix(name, kSpareSuffix, n);
}

std::string SpareTmpFileName(uint64_t n) { return Hex16(n) + kSpareTmpSuffix; }

bool ParseSpareTmpFileName(std::string_view name, uint64_t* n) {
  return ParseHexWithSuffix(name, kSpareTmpSuffix, n);
}

bool IsNoSpace(int err) { return err == ENOSPC || err == EDQUOT; }

Status FsyncDir(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "open directory " + path);
  if (::fsync(fd.get()) != 0) {
    return Status::FromErrno(errno, "fsync directory " + path);
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return Status::FromErrno(errno, "open directory " + path);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

void Log(const std::string& dir, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "stripefs chunk store %s: %s\n", dir.c_str(), buf);
}

}  // namespace stripefs::chunk_paths

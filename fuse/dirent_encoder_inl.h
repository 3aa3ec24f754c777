// Template bodies of dirent_encoder.h (decoders for tests and tools).
// Bounds-checked: never reads past `body`.
#pragma once

#include <cstring>
#include <string_view>

namespace stripefs::fuse {

template <typename Fn>
bool ForEachDirent(std::span<const uint8_t> body, Fn fn) {
  size_t pos = 0;
  while (pos < body.size()) {
    if (body.size() - pos < fuse_abi::FUSE_NAME_OFFSET) return false;
    fuse_abi::fuse_dirent d;
    std::memcpy(&d, body.data() + pos, sizeof(d));
    size_t rec = fuse_abi::FuseDirentSize(d.namelen);
    if (d.namelen == 0 || d.namelen > 4096 || body.size() - pos < rec)
      return false;
    std::string_view name(reinterpret_cast<const char*>(
                              body.data() + pos + fuse_abi::FUSE_NAME_OFFSET),
                          d.namelen);
    fn(d.ino, name, d.type, d.off);
    pos += rec;
  }
  return true;
}

template <typename Fn>
bool ForEachDirentPlus(std::span<const uint8_t> body, Fn fn) {
  size_t pos = 0;
  while (pos < body.size()) {
    if (body.size() - pos < fuse_abi::FUSE_NAME_OFFSET_DIRENTPLUS) return false;
    fuse_abi::fuse_direntplus d;
    std::memcpy(&d, body.data() + pos, sizeof(d));
    size_t rec = fuse_abi::FuseDirentplusSize(d.dirent.namelen);
    if (d.dirent.namelen == 0 || d.dirent.namelen > 4096 ||
        body.size() - pos < rec)
      return false;
    std::string_view name(
        reinterpret_cast<const char*>(body.data() + pos +
                                      fuse_abi::FUSE_NAME_OFFSET_DIRENTPLUS),
        d.dirent.namelen);
    fn(d.entry_out, name, d.dirent.type, d.dirent.off);
    pos += rec;
  }
  return true;
}

}  // namespace stripefs::fuse

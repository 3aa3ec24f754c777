#include "fuse/dirent_encoder.h"

#include <cstring>

namespace stripefs::fuse {
namespace {

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 1024) return false;
  return name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

}  // namespace

bool DirentEncoder::Add(uint64_t ino, std::string_view name, uint32_t type,
                        uint64_t off) {
  if (!ValidName(name)) return false;
  size_t rec = fuse_abi::FuseDirentSize(name.size());
  if (buf_.size() - used_ < rec) return false;
  uint8_t* p = buf_.data() + used_;
  fuse_abi::fuse_dirent d{ino, off, static_cast<uint32_t>(name.size()), type};
  std::memcpy(p, &d, sizeof(d));
  std::memcpy(p + fuse_abi::FUSE_NAME_OFFSET, name.data(), name.size());
  std::memset(p + fuse_abi::FUSE_NAME_OFFSET + name.size(), 0,
              rec - fuse_abi::FUSE_NAME_OFFSET - name.size());
  used_ += rec;
  ++entries_;
  return true;
}

bool DirentPlusEncoder::Add(const fuse_abi::fuse_entry_out& entry,
                            std::string_view name, uint32_t type,
                            uint64_t off) {
  if (!ValidName(name)) return false;
  size_t rec = fuse_abi::FuseDirentplusSize(name.size());
  if (buf_.size() - used_ < rec) return false;
  uint8_t* p = buf_.data() + used_;
  fuse_abi::fuse_direntplus d{};
  d.entry_out = entry;
  d.dirent = {entry.attr.ino, off, static_cast<uint32_t>(name.size()), type};
  std::memcpy(p, &d, sizeof(d));
  std::memcpy(p + fuse_abi::FUSE_NAME_OFFSET_DIRENTPLUS, name.data(),
              name.size());
  std::memset(p + fuse_abi::FUSE_NAME_OFFSET_DIRENTPLUS + name.size(), 0,
              rec - fuse_abi::FUSE_NAME_OFFSET_DIRENTPLUS - name.size());
  used_ += rec;
  ++entries_;
  return true;
}

}  // namespace stripefs::fuse

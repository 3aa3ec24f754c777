// libFuzzer target for PosixAcl::Parse (fs/posix_acl.h): any bytes are
// rejected or decoded without reading past the buffer (ASan/UBSan), and
// what decodes serializes back to the same bytes and survives the mode
// rules.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "fs/posix_acl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);  // exact size for ASan
  auto acl = stripefs::fs::PosixAcl::Parse(
      std::span<const uint8_t>(buf.data(), buf.size()));
  if (!acl.ok()) return 0;
  // Ids of unnamed entries are canonicalized, so compare re-parsed values.
  auto again = stripefs::fs::PosixAcl::Parse(acl->Serialize());
  if (!again.ok() || again->entries() != acl->entries()) std::abort();
  uint32_t mode = 0100666;
  acl->CreateMask(&mode);
  acl->Chmod(mode);
  if ((acl->ModeWithAcl(mode) & 0777) != (mode & 0777)) std::abort();
  return 0;
}

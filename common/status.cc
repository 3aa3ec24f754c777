#include "common/status.h"

#include <cstring>

namespace stripefs {

Status Status::FromErrno(int err, std::string_view what) {
  return Status(err, std::string(what) + ": " + std::strerror(err));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(std::strerror(code_)) + ": " + msg_;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + msg_);
}

}  // namespace stripefs

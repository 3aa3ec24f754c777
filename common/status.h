// Status and Result<T>: errors as values for all of stripefs.
//
// A Status is either OK or carries an errno-style code (so the FUSE layer can
// hand it straight to the kernel) plus a human message that says what happened
// and, where possible, what to do. Result<T> holds either a T or a non-OK
// Status. Both are cheap to move, immutable once built, and safe to pass
// between threads by value.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace stripefs {

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(int code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {EINVAL, std::move(m)};
  }
  static Status NotFound(std::string m) { return {ENOENT, std::move(m)}; }
  static Status Exists(std::string m) { return {EEXIST, std::move(m)}; }
  static Status IoError(std::string m) { return {EIO, std::move(m)}; }
  static Status NoSpace(std::string m) { return {ENOSPC, std::move(m)}; }
  static Status Corruption(std::string m) { return {EBADMSG, std::move(m)}; }
  static Status Unavailable(std::string m) { return {EHOSTDOWN, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {EACCES, std::move(m)};
  }
  static Status NotSupported(std::string m) {
    return {EOPNOTSUPP, std::move(m)};
  }
  // The operation would have to wait (for I/O, a lock, the network) and
  // was asked not to: nothing was done, try again where waiting is fine.
  static Status WouldBlock(std::string m) { return {EAGAIN, std::move(m)}; }
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return code_ == 0; }
  // errno value (EIO, ENOENT, ...); 0 when OK.
  int code() const { return code_; }
  // EAGAIN (== EWOULDBLOCK on Linux): see WouldBlock().
  bool IsWouldBlock() const { return code_ == EAGAIN; }
  const std::string& message() const { return msg_; }
  // "OK" or "<strerror(code)>: <message>".
  std::string ToString() const;

  // Prepends context: "context: message".
  Status Annotate(std::string_view context) const;

 private:
  int code_ = 0;
  std::string msg_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status s) : v_(std::move(s)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok())
      std::abort();  // a Result error must not be OK
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace stripefs

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define STRIPEFS_RETURN_IF_ERROR(expr) \
  do {                                 \
    ::stripefs::Status _st = (expr);   \
    if (!_st.ok()) return _st;         \
  } while (0)

#define STRIPEFS_CONCAT_INNER(a, b) a##b
#define STRIPEFS_CONCAT(a, b) STRIPEFS_CONCAT_INNER(a, b)
// Declares `lhs` from a Result<T> expression, or returns its Status on error.
#define STRIPEFS_ASSIGN_OR_RETURN(lhs, expr)          \
  auto STRIPEFS_CONCAT(_res_, __LINE__) = (expr);     \
  if (!STRIPEFS_CONCAT(_res_, __LINE__).ok())         \
    return STRIPEFS_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(STRIPEFS_CONCAT(_res_, __LINE__)).value()

#include "fuse/request_parser.h"

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <optional>

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT: wire names

// The fixed struct size of `row` on a connection with `o`.
size_t FixedSize(const OpcodeRow& row, const ParseOptions& o) {
  if (o.setxattr_ext && row.fixed_ext != 0) return row.fixed_ext;
  return row.fixed;
}

// The row of an opcode we parse, or nullptr (unknown, or named only).
const OpcodeRow* ParsedRow(uint32_t opcode) {
  const OpcodeRow* r = FindOpcode(opcode);
  return r && r->handler ? r : nullptr;
}

// Takes one NUL-terminated string from the front of `s`.
bool TakeName(std::span<const uint8_t>& s, std::string_view* out) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 0) {
      *out = std::string_view(reinterpret_cast<const char*>(s.data()), i);
      s = s.subspan(i + 1);
      return true;
    }
  }
  return false;
}

ParseResult Fail(int err, std::string reason, const fuse_in_header& h) {
  ParseResult r;
  r.error = err;
  r.reason = std::move(reason);
  r.req.header = h;
  r.req.opcode = h.opcode;
  return r;
}

std::string Describe(const fuse_in_header& h) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s unique=%llu len=%u: ",
                std::string(OpcodeName(h.opcode)).c_str(),
                static_cast<unsigned long long>(h.unique), h.len);
  return buf;
}

}  // namespace

fuse_abi::fuse_forget_one ParsedRequest::ForgetEntry(size_t i) const {
  fuse_abi::fuse_forget_one f{};
  size_t off = i * sizeof(f);
  if (off + sizeof(f) <= data.size())
    std::memcpy(&f, data.data() + off, sizeof(f));
  return f;
}

std::optional<size_t> FixedArgSize(uint32_t opcode, const ParseOptions& opts) {
  const OpcodeRow* r = ParsedRow(opcode);
  if (!r) return std::nullopt;
  return FixedSize(*r, opts);
}

SplitResult SplitDevBuffer(std::span<const uint8_t> buf,
                           const ParseOptions& opts) {
  SplitResult r;
  if (buf.size() < sizeof(fuse_in_header)) {
    r.error = EINVAL;
    r.reason = "request shorter than fuse_in_header (" +
               std::to_string(buf.size()) + " bytes)";
    return r;
  }
  std::memcpy(&r.raw.header, buf.data(), sizeof(fuse_in_header));
  const fuse_in_header& h = r.raw.header;
  if (h.len != buf.size()) {
    r.error = EINVAL;
    r.reason = Describe(h) + "header len " + std::to_string(h.len) +
               " != bytes read " + std::to_string(buf.size());
    return r;
  }
  auto body = buf.subspan(sizeof(fuse_in_header));
  size_t ext = static_cast<size_t>(h.total_extlen) * 8;
  if (ext > body.size()) {
    r.error = EINVAL;
    r.reason = Describe(h) + "extensions (" + std::to_string(ext) +
               " bytes) exceed the request";
    return r;
  }
  body = body.first(body.size() - ext);
  const OpcodeRow* row = ParsedRow(h.opcode);
  size_t fixed = row ? FixedSize(*row, opts) : 0;
  // INIT from old kernels is shorter than today's struct; ParseRequest
  // checks the minimum.
  if (row && row->min_fixed != 0 && body.size() < fixed) fixed = body.size();
  if (body.size() < fixed) {
    r.error = EINVAL;
    r.reason = Describe(h) + "argument struct needs " + std::to_string(fixed) +
               " bytes, got " + std::to_string(body.size());
    return r;
  }
  r.raw.arg0 = body.first(fixed);
  r.raw.rest = body.subspan(fixed);
  return r;
}

namespace {

// The failure of an argument struct `arg0` of the wrong size for `row`,
// if it is.
std::optional<ParseResult> WrongFixedSize(const fuse_in_header& h,
                                          const OpcodeRow& row,
                                          std::span<const uint8_t> arg0,
                                          const ParseOptions& opts) {
  size_t fixed = FixedSize(row, opts);
  if (row.min_fixed != 0) {
    // The struct grew over time (INIT); the first min_fixed bytes exist.
    if (arg0.size() < row.min_fixed || arg0.size() > fixed) {
      return Fail(EINVAL,
                  Describe(h) + "argument struct of " +
                      std::to_string(arg0.size()) + " bytes",
                  h);
    }
  } else if (arg0.size() != fixed) {
    return Fail(EINVAL,
                Describe(h) + "argument struct is " +
                    std::to_string(arg0.size()) + " bytes, expected " +
                    std::to_string(fixed),
                h);
  }
  return std::nullopt;
}

// Takes the bytes after the argument struct as the opcode's tail shape
// says (name, two names, xattr value, write data, forgets, anything) into
// q; the failure when they do not fit it.
std::optional<ParseResult> ParseTail(const fuse_in_header& h, Tail tail,
                                     std::span<const uint8_t> s,
                                     ParsedRequest* q) {
  switch (tail) {
    case Tail::kNone:
      if (!s.empty()) {
        return Fail(EINVAL,
                    Describe(h) + std::to_string(s.size()) +
                        " unexpected trailing bytes",
                    h);
      }
      break;
    case Tail::kName:
      if (!TakeName(s, &q->name)) {
        return Fail(EINVAL, Describe(h) + "name not NUL-terminated", h);
      }
      if (!s.empty()) {
        return Fail(EINVAL, Describe(h) + "bytes after the name", h);
      }
      break;
    case Tail::kTwoNames:
      if (!TakeName(s, &q->name) || !TakeName(s, &q->name2)) {
        return Fail(EINVAL, Describe(h) + "names not NUL-terminated", h);
      }
      if (!s.empty()) {
        return Fail(EINVAL, Describe(h) + "bytes after the second name", h);
      }
      break;
    case Tail::kNameValue: {
      if (!TakeName(s, &q->name)) {
        return Fail(EINVAL, Describe(h) + "xattr name not NUL-terminated", h);
      }
      uint32_t size;  // fuse_setxattr_in.size
      static_assert(offsetof(fuse_setxattr_in, size) == 0);
      std::memcpy(&size, q->in, sizeof(size));
      if (s.size() != size) {
        return Fail(EINVAL,
                    Describe(h) + "xattr value is " + std::to_string(s.size()) +
                        " bytes, header says " + std::to_string(size),
                    h);
      }
      q->data = s;
      break;
    }
    case Tail::kData: {
      auto w = q->In<fuse_write_in>();
      if (s.size() != w.size) {
        return Fail(EINVAL,
                    Describe(h) + "WRITE carries " + std::to_string(s.size()) +
                        " bytes, size says " + std::to_string(w.size),
                    h);
      }
      q->data = s;
      break;
    }
    case Tail::kForgets: {
      auto b = q->In<fuse_batch_forget_in>();
      if (s.size() / sizeof(fuse_forget_one) < b.count ||
          s.size() != static_cast<size_t>(b.count) * sizeof(fuse_forget_one)) {
        return Fail(EINVAL,
                    Describe(h) + "BATCH_FORGET count " +
                        std::to_string(b.count) + " does not match " +
                        std::to_string(s.size()) + " bytes",
                    h);
      }
      q->data = s;
      break;
    }
    case Tail::kAny:
      q->data = s;
      break;
  }
  return std::nullopt;
}

}  // namespace

ParseResult ParseRequest(const fuse_in_header& h, std::span<const uint8_t> arg0,
                         std::span<const uint8_t> rest,
                         const ParseOptions& opts) {
  const OpcodeRow* row = ParsedRow(h.opcode);
  if (!row) {
    return Fail(ENOSYS,
                Describe(h) + "unknown opcode " + std::to_string(h.opcode), h);
  }
  if (auto bad = WrongFixedSize(h, *row, arg0, opts)) return *std::move(bad);
  ParseResult r;
  ParsedRequest& q = r.req;
  q.header = h;
  q.opcode = h.opcode;
  q.in_size = static_cast<uint32_t>(arg0.size());
  if (!arg0.empty()) std::memcpy(q.in, arg0.data(), arg0.size());
  if (auto bad = ParseTail(h, row->tail, rest, &q)) return *std::move(bad);
  return r;
}

ParseResult ParseDevBuffer(std::span<const uint8_t> buf,
                           const ParseOptions& opts) {
  SplitResult sp = SplitDevBuffer(buf, opts);
  if (sp.error != 0) {
    ParseResult r;
    r.error = sp.error;
    r.reason = std::move(sp.reason);
    r.req.header = sp.raw.header;
    r.req.opcode = sp.raw.header.opcode;
    return r;
  }
  return ParseRequest(sp.raw.header, sp.raw.arg0, sp.raw.rest, opts);
}

}  // namespace stripefs::fuse

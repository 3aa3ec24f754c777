#include "fuse-server/request_parser.h"

#include <cerrno>
#include <cstdio>

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT: wire names

// How an opcode's arguments after the fixed struct are laid out.
enum class Tail {
  kNone,       // nothing after the fixed struct
  kName,       // one NUL-terminated name
  kTwoNames,   // two NUL-terminated names
  kNameValue,  // name + value bytes (SETXATTR)
  kData,       // raw bytes (WRITE: exactly in.size)
  kForgets,    // BATCH_FORGET entries
  kAny,        // opaque bytes (IOCTL, NOTIFY_REPLY, unknown layouts)
};

struct OpLayout {
  bool known = false;
  size_t fixed = 0;
  Tail tail = Tail::kNone;
  const char* name = nullptr;
};

constexpr OpLayout L(size_t fixed, Tail tail, const char* name) {
  return OpLayout{true, fixed, tail, name};
}

struct LayoutTable {
  OpLayout op[kOpcodeLimit] = {};
  constexpr LayoutTable() {
    op[FUSE_LOOKUP] = L(0, Tail::kName, "LOOKUP");
    op[FUSE_FORGET] = L(sizeof(fuse_forget_in), Tail::kNone, "FORGET");
    op[FUSE_GETATTR] = L(sizeof(fuse_getattr_in), Tail::kNone, "GETATTR");
    op[FUSE_SETATTR] = L(sizeof(fuse_setattr_in), Tail::kNone, "SETATTR");
    op[FUSE_READLINK] = L(0, Tail::kNone, "READLINK");
    op[FUSE_SYMLINK] = L(0, Tail::kTwoNames, "SYMLINK");
    op[FUSE_MKNOD] = L(sizeof(fuse_mknod_in), Tail::kName, "MKNOD");
    op[FUSE_MKDIR] = L(sizeof(fuse_mkdir_in), Tail::kName, "MKDIR");
    op[FUSE_UNLINK] = L(0, Tail::kName, "UNLINK");
    op[FUSE_RMDIR] = L(0, Tail::kName, "RMDIR");
    op[FUSE_RENAME] = L(sizeof(fuse_rename_in), Tail::kTwoNames, "RENAME");
    op[FUSE_LINK] = L(sizeof(fuse_link_in), Tail::kName, "LINK");
    op[FUSE_OPEN] = L(sizeof(fuse_open_in), Tail::kNone, "OPEN");
    op[FUSE_READ] = L(sizeof(fuse_read_in), Tail::kNone, "READ");
    op[FUSE_WRITE] = L(sizeof(fuse_write_in), Tail::kData, "WRITE");
    op[FUSE_STATFS] = L(0, Tail::kNone, "STATFS");
    op[FUSE_RELEASE] = L(sizeof(fuse_release_in), Tail::kNone, "RELEASE");
    op[FUSE_FSYNC] = L(sizeof(fuse_fsync_in), Tail::kNone, "FSYNC");
    op[FUSE_SETXATTR] =
        L(FUSE_COMPAT_SETXATTR_IN_SIZE, Tail::kNameValue, "SETXATTR");
    op[FUSE_GETXATTR] = L(sizeof(fuse_getxattr_in), Tail::kName, "GETXATTR");
    op[FUSE_LISTXATTR] = L(sizeof(fuse_getxattr_in), Tail::kNone, "LISTXATTR");
    op[FUSE_REMOVEXATTR] = L(0, Tail::kName, "REMOVEXATTR");
    op[FUSE_FLUSH] = L(sizeof(fuse_flush_in), Tail::kNone, "FLUSH");
    op[FUSE_INIT] = L(sizeof(fuse_init_in), Tail::kNone, "INIT");
    op[FUSE_OPENDIR] = L(sizeof(fuse_open_in), Tail::kNone, "OPENDIR");
    op[FUSE_READDIR] = L(sizeof(fuse_read_in), Tail::kNone, "READDIR");
    op[FUSE_RELEASEDIR] = L(sizeof(fuse_release_in), Tail::kNone, "RELEASEDIR");
    op[FUSE_FSYNCDIR] = L(sizeof(fuse_fsync_in), Tail::kNone, "FSYNCDIR");
    op[FUSE_GETLK] = L(sizeof(fuse_lk_in), Tail::kNone, "GETLK");
    op[FUSE_SETLK] = L(sizeof(fuse_lk_in), Tail::kNone, "SETLK");
    op[FUSE_SETLKW] = L(sizeof(fuse_lk_in), Tail::kNone, "SETLKW");
    op[FUSE_ACCESS] = L(sizeof(fuse_access_in), Tail::kNone, "ACCESS");
    op[FUSE_CREATE] = L(sizeof(fuse_create_in), Tail::kName, "CREATE");
    op[FUSE_INTERRUPT] = L(sizeof(fuse_interrupt_in), Tail::kNone, "INTERRUPT");
    op[FUSE_BMAP] = L(sizeof(fuse_bmap_in), Tail::kNone, "BMAP");
    op[FUSE_DESTROY] = L(0, Tail::kNone, "DESTROY");
    op[FUSE_IOCTL] = L(sizeof(fuse_ioctl_in), Tail::kAny, "IOCTL");
    op[FUSE_POLL] = L(sizeof(fuse_poll_in), Tail::kNone, "POLL");
    op[FUSE_NOTIFY_REPLY] =
        L(sizeof(fuse_write_in), Tail::kAny, "NOTIFY_REPLY");
    op[FUSE_BATCH_FORGET] =
        L(sizeof(fuse_batch_forget_in), Tail::kForgets, "BATCH_FORGET");
    op[FUSE_FALLOCATE] = L(sizeof(fuse_fallocate_in), Tail::kNone, "FALLOCATE");
    op[FUSE_READDIRPLUS] = L(sizeof(fuse_read_in), Tail::kNone, "READDIRPLUS");
    op[FUSE_RENAME2] = L(sizeof(fuse_rename2_in), Tail::kTwoNames, "RENAME2");
    op[FUSE_LSEEK] = L(sizeof(fuse_lseek_in), Tail::kNone, "LSEEK");
    op[FUSE_COPY_FILE_RANGE] =
        L(sizeof(fuse_copy_file_range_in), Tail::kNone, "COPY_FILE_RANGE");
    op[FUSE_SYNCFS] = L(sizeof(fuse_syncfs_in), Tail::kNone, "SYNCFS");
    op[FUSE_TMPFILE] = L(sizeof(fuse_create_in), Tail::kName, "TMPFILE");
    // fuse_statx_in: getattr_flags, reserved, fh, sx_flags, sx_mask.
    op[FUSE_STATX] = L(24, Tail::kNone, "STATX");
    op[FUSE_COPY_FILE_RANGE_64] =
        L(sizeof(fuse_copy_file_range_in), Tail::kNone, "COPY_FILE_RANGE_64");
  }
};

constexpr LayoutTable kLayouts;

const OpLayout* LayoutOf(uint32_t opcode) {
  if (opcode >= kOpcodeLimit || !kLayouts.op[opcode].known) return nullptr;
  return &kLayouts.op[opcode];
}

size_t FixedSize(const OpLayout& l, uint32_t opcode, const ParseOptions& o) {
  if (opcode == FUSE_SETXATTR && o.setxattr_ext)
    return sizeof(fuse_setxattr_in);
  return l.fixed;
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
  const OpLayout* l = LayoutOf(opcode);
  if (!l) return std::nullopt;
  return FixedSize(*l, opcode, opts);
}

std::string_view OpcodeName(uint32_t opcode) {
  const OpLayout* l = LayoutOf(opcode);
  if (l) return l->name;
  if (opcode == FUSE_SETUPMAPPING) return "SETUPMAPPING";
  if (opcode == FUSE_REMOVEMAPPING) return "REMOVEMAPPING";
  if (opcode == CUSE_INIT) return "CUSE_INIT";
  return "UNKNOWN";
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
  const OpLayout* l = LayoutOf(h.opcode);
  size_t fixed = l ? FixedSize(*l, h.opcode, opts) : 0;
  // INIT from old kernels is shorter than today's struct; ParseRequest
  // checks the minimum.
  if (h.opcode == FUSE_INIT && body.size() < fixed) fixed = body.size();
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

ParseResult ParseRequest(const fuse_in_header& h, std::span<const uint8_t> arg0,
                         std::span<const uint8_t> rest,
                         const ParseOptions& opts) {
  const OpLayout* l = LayoutOf(h.opcode);
  if (!l) {
    return Fail(ENOSYS,
                Describe(h) + "unknown opcode " + std::to_string(h.opcode), h);
  }
  size_t fixed = FixedSize(*l, h.opcode, opts);
  if (h.opcode == FUSE_INIT) {
    // fuse_init_in grew over time; the first 16 bytes always exist.
    if (arg0.size() < 16 || arg0.size() > fixed) {
      return Fail(EINVAL,
                  Describe(h) + "INIT argument of " +
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
  ParseResult r;
  ParsedRequest& q = r.req;
  q.header = h;
  q.opcode = h.opcode;
  q.in_size = static_cast<uint32_t>(arg0.size());
  if (!arg0.empty()) std::memcpy(q.in, arg0.data(), arg0.size());

  std::span<const uint8_t> s = rest;
  switch (l->tail) {
    case Tail::kNone:
      if (!s.empty()) {
        return Fail(EINVAL,
                    Describe(h) + std::to_string(s.size()) +
                        " unexpected trailing bytes",
                    h);
      }
      break;
    case Tail::kName:
      if (!TakeName(s, &q.name)) {
        return Fail(EINVAL, Describe(h) + "name not NUL-terminated", h);
      }
      if (!s.empty()) {
        return Fail(EINVAL, Describe(h) + "bytes after the name", h);
      }
      break;
    case Tail::kTwoNames:
      if (!TakeName(s, &q.name) || !TakeName(s, &q.name2)) {
        return Fail(EINVAL, Describe(h) + "names not NUL-terminated", h);
      }
      if (!s.empty()) {
        return Fail(EINVAL, Describe(h) + "bytes after the second name", h);
      }
      break;
    case Tail::kNameValue: {
      if (!TakeName(s, &q.name)) {
        return Fail(EINVAL, Describe(h) + "xattr name not NUL-terminated", h);
      }
      uint32_t size;
      std::memcpy(&size, q.in, sizeof(size));  // fuse_setxattr_in.size
      if (s.size() != size) {
        return Fail(EINVAL,
                    Describe(h) + "xattr value is " + std::to_string(s.size()) +
                        " bytes, header says " + std::to_string(size),
                    h);
      }
      q.data = s;
      break;
    }
    case Tail::kData: {
      auto w = q.In<fuse_write_in>();
      if (s.size() != w.size) {
        return Fail(EINVAL,
                    Describe(h) + "WRITE carries " + std::to_string(s.size()) +
                        " bytes, size says " + std::to_string(w.size),
                    h);
      }
      q.data = s;
      break;
    }
    case Tail::kForgets: {
      auto b = q.In<fuse_batch_forget_in>();
      if (s.size() / sizeof(fuse_forget_one) < b.count ||
          s.size() != static_cast<size_t>(b.count) * sizeof(fuse_forget_one)) {
        return Fail(EINVAL,
                    Describe(h) + "BATCH_FORGET count " +
                        std::to_string(b.count) + " does not match " +
                        std::to_string(s.size()) + " bytes",
                    h);
      }
      q.data = s;
      break;
    }
    case Tail::kAny:
      q.data = s;
      break;
  }
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

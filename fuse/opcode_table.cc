#include "fuse/opcode_table.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "fuse/raw_file_system.h"
#include "fuse/request_parser.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT: wire names

// ---- handlers: one per served opcode, in table order ----

void Lookup(const OpCall& c) { c.fs.Lookup(c.Reply(), c.node(), c.q.name); }
void Forget(const OpCall& c) {
  c.fs.Forget(c.node(), c.q.In<fuse_forget_in>().nlookup);
  c.NoReply();
}
void GetAttr(const OpCall& c) {
  c.fs.GetAttr(c.Reply(), c.node(), c.q.In<fuse_getattr_in>());
}
void SetAttr(const OpCall& c) {
  c.fs.SetAttr(c.Reply(), c.node(), c.q.In<fuse_setattr_in>());
}
void ReadLink(const OpCall& c) { c.fs.ReadLink(c.Reply(), c.node()); }
void Symlink(const OpCall& c) {
  c.fs.Symlink(c.Reply(), c.node(), c.q.name, c.q.name2);
}
void Mknod(const OpCall& c) {
  c.fs.Mknod(c.Reply(), c.node(), c.q.name, c.q.In<fuse_mknod_in>());
}
void Mkdir(const OpCall& c) {
  c.fs.Mkdir(c.Reply(), c.node(), c.q.name, c.q.In<fuse_mkdir_in>());
}
void Unlink(const OpCall& c) { c.fs.Unlink(c.Reply(), c.node(), c.q.name); }
void Rmdir(const OpCall& c) { c.fs.Rmdir(c.Reply(), c.node(), c.q.name); }
void Rename(const OpCall& c) {
  c.fs.Rename(c.Reply(), c.node(), c.q.name, c.q.In<fuse_rename_in>().newdir,
              c.q.name2, 0);
}
void Link(const OpCall& c) {
  c.fs.Link(c.Reply(), c.q.In<fuse_link_in>().oldnodeid, c.node(), c.q.name);
}
void Open(const OpCall& c) {
  c.fs.Open(c.Reply(), c.node(), c.q.In<fuse_open_in>());
}
void Read(const OpCall& c) {
  c.fs.Read(c.Reply(), c.node(), c.q.In<fuse_read_in>());
}
void Write(const OpCall& c) {
  WriteRequest w;
  w.in = c.q.In<fuse_write_in>();
  w.data = c.q.data;
  c.fs.Write(c.Reply(), c.node(), w);
}
void StatFs(const OpCall& c) { c.fs.StatFs(c.Reply(), c.node()); }
void Release(const OpCall& c) {
  c.fs.Release(c.Reply(), c.node(), c.q.In<fuse_release_in>());
}
void Fsync(const OpCall& c) {
  c.fs.Fsync(c.Reply(), c.node(), c.q.In<fuse_fsync_in>());
}
void SetXattr(const OpCall& c) {
  // Without FUSE_SETXATTR_EXT only the first 8 bytes came; the rest stays 0.
  fuse_setxattr_in in{};
  std::memcpy(&in, c.q.in, std::min<size_t>(c.q.in_size, sizeof(in)));
  c.fs.SetXattr(c.Reply(), c.node(), c.q.name, c.q.data, in);
}
void GetXattr(const OpCall& c) {
  c.fs.GetXattr(c.Reply(), c.node(), c.q.name, c.q.In<fuse_getxattr_in>().size);
}
void ListXattr(const OpCall& c) {
  c.fs.ListXattr(c.Reply(), c.node(), c.q.In<fuse_getxattr_in>().size);
}
void RemoveXattr(const OpCall& c) {
  c.fs.RemoveXattr(c.Reply(), c.node(), c.q.name);
}
void Flush(const OpCall& c) {
  c.fs.Flush(c.Reply(), c.node(), c.q.In<fuse_flush_in>());
}
void Init(const OpCall& c) { c.engine.Init(c.inflight, c.q); }
void OpenDir(const OpCall& c) {
  c.fs.OpenDir(c.Reply(), c.node(), c.q.In<fuse_open_in>());
}
void ReadDir(const OpCall& c) {
  c.fs.ReadDir(c.Reply(), c.node(), c.q.In<fuse_read_in>());
}
void ReleaseDir(const OpCall& c) {
  c.fs.ReleaseDir(c.Reply(), c.node(), c.q.In<fuse_release_in>());
}
void FsyncDir(const OpCall& c) {
  c.fs.FsyncDir(c.Reply(), c.node(), c.q.In<fuse_fsync_in>());
}
void Access(const OpCall& c) {
  c.fs.Access(c.Reply(), c.node(), c.q.In<fuse_access_in>().mask);
}
void Create(const OpCall& c) {
  c.fs.Create(c.Reply(), c.node(), c.q.name, c.q.In<fuse_create_in>());
}
void TmpFile(const OpCall& c) {
  c.fs.TmpFile(c.Reply(), c.node(), c.q.In<fuse_create_in>());
}
void Interrupt(const OpCall& c) {
  c.engine.Interrupt(c.inflight, c.q.In<fuse_interrupt_in>().unique);
}
void Destroy(const OpCall& c) { c.engine.Destroy(c.inflight); }
void NotifyReply(const OpCall& c) { c.NoReply(); }  // we never RETRIEVE
void BatchForget(const OpCall& c) {
  uint32_t n = c.q.In<fuse_batch_forget_in>().count;
  std::vector<fuse_forget_one> items(n);
  for (uint32_t i = 0; i < n; ++i) items[i] = c.q.ForgetEntry(i);
  c.fs.BatchForget(items);
  c.NoReply();
}
void Fallocate(const OpCall& c) {
  c.fs.Fallocate(c.Reply(), c.node(), c.q.In<fuse_fallocate_in>());
}
void ReadDirPlus(const OpCall& c) {
  c.fs.ReadDirPlus(c.Reply(), c.node(), c.q.In<fuse_read_in>());
}
void Rename2(const OpCall& c) {
  auto in = c.q.In<fuse_rename2_in>();
  c.fs.Rename(c.Reply(), c.node(), c.q.name, in.newdir, c.q.name2, in.flags);
}
void Lseek(const OpCall& c) {
  c.fs.Lseek(c.Reply(), c.node(), c.q.In<fuse_lseek_in>());
}
void CopyFileRange(const OpCall& c) {
  c.fs.CopyFileRange(c.Reply(), c.node(), c.q.In<fuse_copy_file_range_in>());
}
void SyncFs(const OpCall& c) { c.fs.SyncFs(c.Reply(), c.node()); }
// Each sub-request goes through its own row's handler (fuse/compound.h).
void Compound(const OpCall& c) { c.engine.Compound(c.inflight, c.q); }
// Parsed but not served (locks, bmap, ioctl, poll, tmpfile, statx): the
// kernel falls back or reports ENOSYS to the caller.
void Unsupported(const OpCall& c) { c.Reply().Error(ENOSYS); }

// ---- the table ----

constexpr OpcodeRow R(uint32_t op, std::string_view name, size_t fixed,
                      Tail tail, OpHandler h) {
  OpcodeRow r;
  r.opcode = op;
  r.name = name;
  r.fixed = fixed;
  r.tail = tail;
  r.handler = h;
  return r;
}
constexpr OpcodeRow NoReply(OpcodeRow r, ReplyRule rule = ReplyRule::kNever) {
  r.reply = rule;
  return r;
}

// SETXATTR: the struct is `ext` bytes once FUSE_SETXATTR_EXT was agreed.
constexpr OpcodeRow ExtSize(OpcodeRow r, size_t ext) {
  r.fixed_ext = ext;
  return r;
}
// INIT: comes before INIT, and old kernels send only `min` bytes of it.
constexpr OpcodeRow FirstRequest(OpcodeRow r, size_t min) {
  r.min_fixed = min;
  r.before_init = true;
  return r;
}

constexpr size_t kNoArgs = 0;

// clang-format off
constexpr OpcodeRow kRows[] = {
  R(FUSE_LOOKUP,       "LOOKUP",       kNoArgs,                     Tail::kName,     Lookup),
  NoReply(R(FUSE_FORGET, "FORGET",     sizeof(fuse_forget_in),      Tail::kNone,     Forget)),
  R(FUSE_GETATTR,      "GETATTR",      sizeof(fuse_getattr_in),     Tail::kNone,     GetAttr),
  R(FUSE_SETATTR,      "SETATTR",      sizeof(fuse_setattr_in),     Tail::kNone,     SetAttr),
  R(FUSE_READLINK,     "READLINK",     kNoArgs,                     Tail::kNone,     ReadLink),
  R(FUSE_SYMLINK,      "SYMLINK",      kNoArgs,                     Tail::kTwoNames, Symlink),
  R(FUSE_MKNOD,        "MKNOD",        sizeof(fuse_mknod_in),       Tail::kName,     Mknod),
  R(FUSE_MKDIR,        "MKDIR",        sizeof(fuse_mkdir_in),       Tail::kName,     Mkdir),
  R(FUSE_UNLINK,       "UNLINK",       kNoArgs,                     Tail::kName,     Unlink),
  R(FUSE_RMDIR,        "RMDIR",        kNoArgs,                     Tail::kName,     Rmdir),
  R(FUSE_RENAME,       "RENAME",       sizeof(fuse_rename_in),      Tail::kTwoNames, Rename),
  R(FUSE_LINK,         "LINK",         sizeof(fuse_link_in),        Tail::kName,     Link),
  R(FUSE_OPEN,         "OPEN",         sizeof(fuse_open_in),        Tail::kNone,     Open),
  R(FUSE_READ,         "READ",         sizeof(fuse_read_in),        Tail::kNone,     Read),
  R(FUSE_WRITE,        "WRITE",        sizeof(fuse_write_in),       Tail::kData,     Write),
  R(FUSE_STATFS,       "STATFS",       kNoArgs,                     Tail::kNone,     StatFs),
  R(FUSE_RELEASE,      "RELEASE",      sizeof(fuse_release_in),     Tail::kNone,     Release),
  R(FUSE_FSYNC,        "FSYNC",        sizeof(fuse_fsync_in),       Tail::kNone,     Fsync),
  ExtSize(R(FUSE_SETXATTR, "SETXATTR", FUSE_COMPAT_SETXATTR_IN_SIZE, Tail::kNameValue, SetXattr),
          sizeof(fuse_setxattr_in)),
  R(FUSE_GETXATTR,     "GETXATTR",     sizeof(fuse_getxattr_in),    Tail::kName,     GetXattr),
  R(FUSE_LISTXATTR,    "LISTXATTR",    sizeof(fuse_getxattr_in),    Tail::kNone,     ListXattr),
  R(FUSE_REMOVEXATTR,  "REMOVEXATTR",  kNoArgs,                     Tail::kName,     RemoveXattr),
  R(FUSE_FLUSH,        "FLUSH",        sizeof(fuse_flush_in),       Tail::kNone,     Flush),
  FirstRequest(R(FUSE_INIT, "INIT", sizeof(fuse_init_in), Tail::kNone, Init),
               FUSE_COMPAT_INIT_IN_SIZE),
  R(FUSE_OPENDIR,      "OPENDIR",      sizeof(fuse_open_in),        Tail::kNone,     OpenDir),
  R(FUSE_READDIR,      "READDIR",      sizeof(fuse_read_in),        Tail::kNone,     ReadDir),
  R(FUSE_RELEASEDIR,   "RELEASEDIR",   sizeof(fuse_release_in),     Tail::kNone,     ReleaseDir),
  R(FUSE_FSYNCDIR,     "FSYNCDIR",     sizeof(fuse_fsync_in),       Tail::kNone,     FsyncDir),
  R(FUSE_GETLK,        "GETLK",        sizeof(fuse_lk_in),          Tail::kNone,     Unsupported),
  R(FUSE_SETLK,        "SETLK",        sizeof(fuse_lk_in),          Tail::kNone,     Unsupported),
  R(FUSE_SETLKW,       "SETLKW",       sizeof(fuse_lk_in),          Tail::kNone,     Unsupported),
  R(FUSE_ACCESS,       "ACCESS",       sizeof(fuse_access_in),      Tail::kNone,     Access),
  R(FUSE_CREATE,       "CREATE",       sizeof(fuse_create_in),      Tail::kName,     Create),
  NoReply(R(FUSE_INTERRUPT, "INTERRUPT", sizeof(fuse_interrupt_in), Tail::kNone,     Interrupt),
          ReplyRule::kOnlyEagain),
  R(FUSE_BMAP,         "BMAP",         sizeof(fuse_bmap_in),        Tail::kNone,     Unsupported),
  R(FUSE_DESTROY,      "DESTROY",      kNoArgs,                     Tail::kNone,     Destroy),
  R(FUSE_IOCTL,        "IOCTL",        sizeof(fuse_ioctl_in),       Tail::kAny,      Unsupported),
  R(FUSE_POLL,         "POLL",         sizeof(fuse_poll_in),        Tail::kNone,     Unsupported),
  NoReply(R(FUSE_NOTIFY_REPLY, "NOTIFY_REPLY", sizeof(fuse_write_in), Tail::kAny,    NotifyReply)),
  NoReply(R(FUSE_BATCH_FORGET, "BATCH_FORGET", sizeof(fuse_batch_forget_in), Tail::kForgets, BatchForget)),
  R(FUSE_FALLOCATE,    "FALLOCATE",    sizeof(fuse_fallocate_in),   Tail::kNone,     Fallocate),
  R(FUSE_READDIRPLUS,  "READDIRPLUS",  sizeof(fuse_read_in),        Tail::kNone,     ReadDirPlus),
  R(FUSE_RENAME2,      "RENAME2",      sizeof(fuse_rename2_in),     Tail::kTwoNames, Rename2),
  R(FUSE_LSEEK,        "LSEEK",        sizeof(fuse_lseek_in),       Tail::kNone,     Lseek),
  R(FUSE_COPY_FILE_RANGE, "COPY_FILE_RANGE", sizeof(fuse_copy_file_range_in), Tail::kNone, CopyFileRange),
  // DAX mappings: named, never parsed (answered ENOSYS).
  R(FUSE_SETUPMAPPING,   "SETUPMAPPING",  kNoArgs,                  Tail::kAny,      nullptr),
  R(FUSE_REMOVEMAPPING,  "REMOVEMAPPING", kNoArgs,                  Tail::kAny,      nullptr),
  R(FUSE_SYNCFS,       "SYNCFS",       sizeof(fuse_syncfs_in),      Tail::kNone,     SyncFs),
  R(FUSE_TMPFILE,      "TMPFILE",      sizeof(fuse_create_in),      Tail::kName,     TmpFile),
  R(FUSE_STATX,        "STATX",        sizeof(fuse_statx_in),       Tail::kNone,     Unsupported),
  R(FUSE_COPY_FILE_RANGE_64, "COPY_FILE_RANGE_64", sizeof(fuse_copy_file_range_in), Tail::kNone, CopyFileRange),
  R(FUSE_COMPOUND,     "COMPOUND",     sizeof(fuse_compound_in),    Tail::kAny,      Compound),
};
// clang-format on

// Every fixed struct travels in the io-uring op_in area and in
// ParsedRequest::in.
constexpr bool FitsOpIn() {
  for (const OpcodeRow& r : kRows) {
    if (r.fixed > FUSE_URING_OP_IN_OUT_SZ) return false;
    if (r.fixed_ext > FUSE_URING_OP_IN_OUT_SZ) return false;
  }
  return true;
}
static_assert(FitsOpIn());

struct Index {
  int8_t pos[kOpcodeLimit];
  bool ok = true;  // every opcode in range, none twice
  constexpr Index() : pos{} {
    for (auto& p : pos) p = -1;
    for (size_t i = 0; i < std::size(kRows); ++i) {
      uint32_t op = kRows[i].opcode;
      if (op >= kOpcodeLimit || pos[op] >= 0) {
        ok = false;
        continue;
      }
      pos[op] = static_cast<int8_t>(i);
    }
  }
};
constexpr Index kIndex;
static_assert(kIndex.ok, "opcode table: an opcode is out of range or twice");
static_assert(std::size(kRows) < 128);

}  // namespace

uint64_t OpCall::node() const { return q.header.nodeid; }

const OpcodeRow* FindOpcode(uint32_t opcode) {
  if (opcode >= kOpcodeLimit || kIndex.pos[opcode] < 0) return nullptr;
  return &kRows[kIndex.pos[opcode]];
}

std::string_view OpcodeName(uint32_t opcode) {
  if (const OpcodeRow* r = FindOpcode(opcode)) return r->name;
  if (opcode == CUSE_INIT) return "CUSE_INIT";
  return "UNKNOWN";
}

bool IsNoReplyOpcode(uint32_t opcode) {
  const OpcodeRow* r = FindOpcode(opcode);
  return r && r->reply == ReplyRule::kNever;
}

}  // namespace stripefs::fuse

#include "tests/lossyfs/lossy_fs.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "fuse/dirent_encoder.h"

namespace stripefs::lossyfs {

using namespace fuse_abi;  // NOLINT
using fuse::Replier;

namespace {
constexpr uint64_t kControlIno = 2;

void Now(uint64_t* s, uint32_t* ns) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  *s = static_cast<uint64_t>(ts.tv_sec);
  *ns = static_cast<uint32_t>(ts.tv_nsec);
}
bool ValidName(std::string_view n) {
  return !n.empty() && n.size() <= 255 && n != "." && n != "..";
}
bool IsControl(uint64_t parent, std::string_view name) {
  return parent == fuse_abi::kRootId && name == kControlName;
}
// The kernel keeps nothing: every lookup and stat comes back to us, so the
// state after a cut is what the next access sees.
constexpr uint64_t kNoCache = 0;
}  // namespace

void LossyFs::KeepMeta(const State& from, State* to) {
  to->mode = from.mode;
  to->uid = from.uid;
  to->gid = from.gid;
  to->atime = from.atime;
  to->mtime = from.mtime;
  to->ctime = from.ctime;
  to->atimensec = from.atimensec;
  to->mtimensec = from.mtimensec;
  to->ctimensec = from.ctimensec;
  to->target = from.target;
}
LossyFs::LossyFs(uint64_t seed) : rng_(seed) {
  auto root = std::make_unique<Node>();
  root->ino = kRootId;
  root->live.mode = S_IFDIR | 0777;
  Now(&root->live.mtime, &root->live.mtimensec);
  root->live.ctime = root->live.atime = root->live.mtime;
  root->durable = root->live;
  root->nlink = 2;
  nodes_[kRootId] = std::move(root);
}

LossyFs::~LossyFs() = default;

fuse::SessionOptions LossyFs::SessionOptionsForLossyFs() {
  fuse::SessionOptions o;
  o.transport = fuse::TransportChoice::kDev;
  // Every write reaches us before write(2) returns; nothing waits in the
  // kernel's page cache where a cut could not drop it.
  o.init.writeback_cache = false;
  o.init.readdirplus = false;
  o.init.readdirplus_auto = false;
  o.init.handle_killpriv_v2 = false;
  // An io_uring O_DIRECT write would otherwise travel as a background
  // request that may reach us after its killed writer was reaped, i.e.
  // after the cut meant to end it.
  o.init.async_dio = false;
  return o;
}

LossyFs::Node* LossyFs::Get(uint64_t ino) {
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second.get();
}

LossyFs::Node* LossyFs::NewNode(uint32_t mode, uint32_t uid, uint32_t gid) {
  auto n = std::make_unique<Node>();
  n->ino = next_ino_++;
  n->live.mode = mode;
  n->live.uid = uid;
  n->live.gid = gid;
  Now(&n->live.mtime, &n->live.mtimensec);
  n->live.atime = n->live.ctime = n->live.mtime;
  n->live.atimensec = n->live.ctimensec = n->live.mtimensec;
  // Until its first sync the inode is durably what a crash right after
  // its creation leaves: an empty inode of its type.
  n->durable.mode = mode;
  n->durable.uid = uid;
  n->durable.gid = gid;
  n->nlink = S_ISDIR(mode) ? 2 : 1;
  Node* p = n.get();
  nodes_[p->ino] = std::move(n);
  return p;
}

fuse_attr LossyFs::AttrOf(const Node& n) const {
  const State& s = n.live;
  fuse_attr a{};
  a.ino = n.ino;
  a.mode = s.mode;
  a.nlink = n.nlink;
  a.uid = s.uid;
  a.gid = s.gid;
  a.size = S_ISLNK(s.mode) ? s.target.size() : s.data.size();
  a.blocks = (a.size + 511) / 512;
  a.blksize = 4096;
  a.atime = s.atime;
  a.mtime = s.mtime;
  a.ctime = s.ctime;
  a.atimensec = s.atimensec;
  a.mtimensec = s.mtimensec;
  a.ctimensec = s.ctimensec;
  return a;
}

fuse_entry_out LossyFs::EntryOf(Node* n) {
  n->lookups++;
  fuse_entry_out e{};
  e.nodeid = n->ino;
  e.generation = 1;
  e.entry_valid = kNoCache;
  e.attr_valid = kNoCache;
  e.attr = AttrOf(*n);
  return e;
}

namespace {
fuse_attr ControlAttr() {
  fuse_attr a{};
  a.ino = 2;
  a.mode = S_IFREG | 0600;
  a.nlink = 1;
  a.blksize = 4096;
  return a;
}
}  // namespace

void LossyFs::MarkDirty(Node* n, uint64_t lo, uint64_t hi) {
  uint64_t size = n->live.data.size();
  n->dirty_lo = std::min({n->dirty_lo, lo, size});
  n->dirty_hi = std::max({n->dirty_hi, hi, size});
  if (last_write_.valid && last_write_.ino == n->ino) {
    // A later change to the same file: the remembered write's bytes may
    // no longer be in live, so it cannot be torn any more.
    last_write_.valid = false;
  }
}

void LossyFs::SyncDataLocked(Node* n) {
  std::vector<uint8_t>& live = n->live.data;
  std::vector<uint8_t>& dur = n->durable.data;
  dur.resize(live.size(), 0);
  uint64_t hi = std::min<uint64_t>(n->dirty_hi, live.size());
  if (n->dirty_lo < hi) {
    std::memcpy(dur.data() + n->dirty_lo, live.data() + n->dirty_lo,
                hi - n->dirty_lo);
  }
  n->dirty_lo = UINT64_MAX;
  n->dirty_hi = 0;
  if (last_write_.valid && last_write_.ino == n->ino) last_write_.valid = false;
}

void LossyFs::SyncAllLocked() {
  for (auto& [ino, n] : nodes_) {
    SyncDataLocked(n.get());
    KeepMeta(n->live, &n->durable);
    n->durable.children = n->live.children;
  }
  syncs_++;
}

void LossyFs::Sync() {
  std::lock_guard<std::mutex> lock(mu_);
  SyncAllLocked();
}

uint64_t LossyFs::cuts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cuts_;
}

CutReport LossyFs::PowerCut(bool tear) {
  std::lock_guard<std::mutex> lock(mu_);
  CutReport rep;
  // The torn piece is read from live before live is rolled back (the
  // remembered write is the file's last change, so its bytes are there).
  std::vector<uint8_t> piece;
  if (tear && last_write_.valid) {
    const LastWrite& w = last_write_;
    uint64_t first = w.offset / kSectorBytes + 1;  // boundaries inside
    uint64_t last = (w.offset + w.length - 1) / kSectorBytes;
    rep.ino = w.ino;
    rep.offset = w.offset;
    rep.length = w.length;
    if (first <= last) {
      std::uniform_int_distribution<uint64_t> pick(first, last);
      rep.kept = pick(rng_) * kSectorBytes - w.offset;
      Node* n = Get(w.ino);
      piece.assign(n->live.data.begin() + w.offset,
                   n->live.data.begin() + w.offset + rep.kept);
      rep.torn = true;
    }
  }
  last_write_.valid = false;
  for (auto& [ino, n] : nodes_) {
    n->live = n->durable;
    n->dirty_lo = UINT64_MAX;
    n->dirty_hi = 0;
  }
  // What the root no longer reaches is gone; link counts are recounted.
  std::set<uint64_t> reached{kRootId};
  std::map<uint64_t, uint32_t> names;
  std::vector<uint64_t> todo{kRootId};
  while (!todo.empty()) {
    Node* d = Get(todo.back());
    todo.pop_back();
    for (auto& [name, child] : d->live.children) {
      names[child]++;
      if (reached.insert(child).second && S_ISDIR(Get(child)->live.mode)) {
        todo.push_back(child);
      }
    }
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    Node* n = it->second.get();
    if (reached.count(n->ino)) {
      n->nlink = S_ISDIR(n->live.mode) ? 2 : names[n->ino];
      ++it;
      continue;
    }
    rep.vanished_inodes++;
    if (n->lookups == 0) {
      it = nodes_.erase(it);
      continue;
    }
    // The kernel still holds it (an open file): an empty, nameless inode.
    n->nlink = 0;
    n->live.data.clear();
    n->live.children.clear();
    n->durable = n->live;
    ++it;
  }
  if (rep.torn) {
    Node* n = Get(rep.ino);
    if (n && reached.count(rep.ino)) {
      std::vector<uint8_t>& d = n->live.data;
      if (d.size() < rep.offset + rep.kept) d.resize(rep.offset + rep.kept, 0);
      std::memcpy(d.data() + rep.offset, piece.data(), piece.size());
      n->durable.data = d;
    }
  }
  cuts_++;
  return rep;
}

void LossyFs::MaybeFreeLocked(Node* n) {
  if (n->ino == kRootId || n->lookups > 0 || n->nlink > 0) return;
  for (auto& [ino, d] : nodes_) {  // still named on "disk"?
    for (auto& [name, child] : d->durable.children) {
      if (child == n->ino) return;
    }
  }
  if (last_write_.valid && last_write_.ino == n->ino) last_write_.valid = false;
  nodes_.erase(n->ino);
}

bool LossyFs::RunCommand(std::string_view cmd) {
  while (!cmd.empty() && (cmd.back() == '\n' || cmd.back() == ' ')) {
    cmd.remove_suffix(1);
  }
  if (cmd == "cut" || cmd == "cut torn") {
    CutReport rep = PowerCut(cmd == "cut torn");
    std::fprintf(stderr,
                 "lossyfs: power cut: %llu inodes vanished, torn=%d (ino %llu "
                 "kept %llu of %llu bytes at %llu)\n",
                 static_cast<unsigned long long>(rep.vanished_inodes),
                 rep.torn ? 1 : 0, static_cast<unsigned long long>(rep.ino),
                 static_cast<unsigned long long>(rep.kept),
                 static_cast<unsigned long long>(rep.length),
                 static_cast<unsigned long long>(rep.offset));
    return true;
  }
  if (cmd == "sync") {
    Sync();
    return true;
  }
  std::fprintf(stderr,
               "lossyfs: unknown control command '%.*s': write 'cut', "
               "'cut torn' or 'sync' to %s\n",
               static_cast<int>(cmd.size()), cmd.data(), kControlName.data());
  return false;
}

void LossyFs::Lookup(Replier r, uint64_t parent, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsControl(parent, name)) {
    fuse_entry_out e{};
    e.nodeid = kControlIno;
    e.generation = 1;
    e.attr = ControlAttr();
    return r.Entry(e);
  }
  Node* d = Get(parent);
  if (!d || !S_ISDIR(d->live.mode)) return r.Error(ENOTDIR);
  auto it = d->live.children.find(std::string(name));
  if (it == d->live.children.end()) return r.Error(ENOENT);
  r.Entry(EntryOf(Get(it->second)));
}

void LossyFs::Forget(uint64_t nodeid, uint64_t nlookup) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return;
  n->lookups -= std::min(n->lookups, nlookup);
  MaybeFreeLocked(n);
}

void LossyFs::GetAttr(Replier r, uint64_t nodeid, const fuse_getattr_in&) {
  std::lock_guard<std::mutex> lock(mu_);
  fuse_attr_out a{};
  a.attr_valid = kNoCache;
  if (nodeid == kControlIno) {
    a.attr = ControlAttr();
    return r.Attr(a);
  }
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  a.attr = AttrOf(*n);
  r.Attr(a);
}

void LossyFs::SetAttr(Replier r, uint64_t nodeid, const fuse_setattr_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  fuse_attr_out a{};
  a.attr_valid = kNoCache;
  if (nodeid == kControlIno) {  // `echo cut > ctl` truncates first
    a.attr = ControlAttr();
    return r.Attr(a);
  }
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  State& s = n->live;
  if (in.valid & FATTR_SIZE) {
    if (!S_ISREG(s.mode)) return r.Error(EINVAL);
    uint64_t old = s.data.size();
    s.data.resize(in.size, 0);
    MarkDirty(n, std::min<uint64_t>(old, in.size),
              std::max<uint64_t>(old, in.size));
    Now(&s.mtime, &s.mtimensec);
  }
  if (in.valid & FATTR_MODE) s.mode = (s.mode & S_IFMT) | (in.mode & 07777);
  if (in.valid & FATTR_UID) s.uid = in.uid;
  if (in.valid & FATTR_GID) s.gid = in.gid;
  if (in.valid & FATTR_ATIME) {
    s.atime = in.atime;
    s.atimensec = in.atimensec;
  }
  if (in.valid & FATTR_ATIME_NOW) Now(&s.atime, &s.atimensec);
  if (in.valid & FATTR_MTIME) {
    s.mtime = in.mtime;
    s.mtimensec = in.mtimensec;
  }
  if (in.valid & FATTR_MTIME_NOW) Now(&s.mtime, &s.mtimensec);
  Now(&s.ctime, &s.ctimensec);
  a.attr = AttrOf(*n);
  r.Attr(a);
}

void LossyFs::ReadLink(Replier r, uint64_t nodeid) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n || !S_ISLNK(n->live.mode)) return r.Error(EINVAL);
  r.Data(std::string_view(n->live.target));
}

void LossyFs::MakeNode(Replier r, uint64_t parent, std::string_view name,
                       uint32_t mode, std::string_view target, bool open) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(parent);
  if (!d || !S_ISDIR(d->live.mode)) return r.Error(ENOTDIR);
  if (!ValidName(name)) return r.Error(EINVAL);
  if (IsControl(parent, name) || d->live.children.count(std::string(name))) {
    return r.Error(EEXIST);
  }
  Node* n = NewNode(mode, r.ctx().uid, r.ctx().gid);
  n->live.target = n->durable.target = std::string(target);
  d->live.children[std::string(name)] = n->ino;
  Now(&d->live.mtime, &d->live.mtimensec);
  if (!open) return r.Entry(EntryOf(n));
  fuse_open_out o{};
  o.fh = n->ino;
  o.open_flags = FOPEN_DIRECT_IO;
  r.Create(EntryOf(n), o);
}

void LossyFs::Symlink(Replier r, uint64_t parent, std::string_view name,
                      std::string_view target) {
  MakeNode(std::move(r), parent, name, S_IFLNK | 0777, target, false);
}

void LossyFs::Mknod(Replier r, uint64_t parent, std::string_view name,
                    const fuse_mknod_in& in) {
  if (!S_ISREG(in.mode) && !S_ISFIFO(in.mode)) return r.Error(EPERM);
  MakeNode(std::move(r), parent, name, in.mode, {}, false);
}

void LossyFs::Mkdir(Replier r, uint64_t parent, std::string_view name,
                    const fuse_mkdir_in& in) {
  MakeNode(std::move(r), parent, name, S_IFDIR | (in.mode & 07777), {}, false);
}

void LossyFs::Create(Replier r, uint64_t parent, std::string_view name,
                     const fuse_create_in& in) {
  MakeNode(std::move(r), parent, name, S_IFREG | (in.mode & 07777), {}, true);
}

void LossyFs::Unlink(Replier r, uint64_t parent, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsControl(parent, name)) return r.Error(EPERM);
  Node* d = Get(parent);
  if (!d) return r.Error(ENOENT);
  auto it = d->live.children.find(std::string(name));
  if (it == d->live.children.end()) return r.Error(ENOENT);
  Node* n = Get(it->second);
  if (S_ISDIR(n->live.mode)) return r.Error(EISDIR);
  d->live.children.erase(it);
  Now(&d->live.mtime, &d->live.mtimensec);
  n->nlink--;
  MaybeFreeLocked(n);
  r.Ok();
}

void LossyFs::Rmdir(Replier r, uint64_t parent, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(parent);
  if (!d) return r.Error(ENOENT);
  auto it = d->live.children.find(std::string(name));
  if (it == d->live.children.end()) return r.Error(ENOENT);
  Node* n = Get(it->second);
  if (!S_ISDIR(n->live.mode)) return r.Error(ENOTDIR);
  if (!n->live.children.empty()) return r.Error(ENOTEMPTY);
  d->live.children.erase(it);
  Now(&d->live.mtime, &d->live.mtimensec);
  n->nlink = 0;
  MaybeFreeLocked(n);
  r.Ok();
}

void LossyFs::Rename(Replier r, uint64_t olddir, std::string_view oldname,
                     uint64_t newdir, std::string_view newname,
                     uint32_t flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsControl(olddir, oldname) || IsControl(newdir, newname)) {
    return r.Error(EPERM);
  }
  Node* od = Get(olddir);
  Node* nd = Get(newdir);
  if (!od || !nd) return r.Error(ENOENT);
  if (flags & ~(kRenameNoReplace | kRenameExchange)) return r.Error(EINVAL);
  auto& ochildren = od->live.children;
  auto& nchildren = nd->live.children;
  auto oit = ochildren.find(std::string(oldname));
  if (oit == ochildren.end()) return r.Error(ENOENT);
  auto nit = nchildren.find(std::string(newname));
  Now(&od->live.mtime, &od->live.mtimensec);
  Now(&nd->live.mtime, &nd->live.mtimensec);
  if (flags & kRenameExchange) {
    if (nit == nchildren.end()) return r.Error(ENOENT);
    std::swap(oit->second, nit->second);
    return r.Ok();
  }
  Node* victim = nullptr;
  if (nit != nchildren.end()) {
    if (flags & kRenameNoReplace) return r.Error(EEXIST);
    if (nit->second == oit->second) return r.Ok();  // two names of one inode
    victim = Get(nit->second);
    if (S_ISDIR(victim->live.mode) && !victim->live.children.empty()) {
      return r.Error(ENOTEMPTY);
    }
  }
  uint64_t ino = oit->second;
  ochildren.erase(oit);
  nchildren[std::string(newname)] = ino;
  if (victim) {
    victim->nlink = S_ISDIR(victim->live.mode) ? 0 : victim->nlink - 1;
    MaybeFreeLocked(victim);
  }
  r.Ok();
}

void LossyFs::Link(Replier r, uint64_t oldnode, uint64_t newparent,
                   std::string_view newname) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(oldnode);
  Node* d = Get(newparent);
  if (!n || !d) return r.Error(ENOENT);
  if (!ValidName(newname)) return r.Error(EINVAL);
  if (IsControl(newparent, newname) ||
      d->live.children.count(std::string(newname))) {
    return r.Error(EEXIST);
  }
  d->live.children[std::string(newname)] = n->ino;
  n->nlink++;
  r.Entry(EntryOf(n));
}

void LossyFs::Open(Replier r, uint64_t nodeid, const fuse_open_in&) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodeid != kControlIno && !Get(nodeid)) return r.Error(ENOENT);
  fuse_open_out o{};
  o.fh = nodeid;
  // No page cache: a cut must show at the next read.
  o.open_flags = FOPEN_DIRECT_IO;
  r.Open(o);
}

void LossyFs::Read(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodeid == kControlIno) {
    std::string s = "cuts " + std::to_string(cuts_) + " syncs " +
                    std::to_string(syncs_) + "\n";
    if (in.offset >= s.size()) return r.Data(std::string_view());
    return r.Data(std::string_view(s).substr(in.offset, in.size));
  }
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  const std::vector<uint8_t>& d = n->live.data;
  if (in.offset >= d.size()) return r.Data(std::span<const uint8_t>());
  size_t len = std::min<size_t>(in.size, d.size() - in.offset);
  r.Data(std::span<const uint8_t>(d.data() + in.offset, len));
}

void LossyFs::Write(Replier r, uint64_t nodeid, const fuse::WriteRequest& w) {
  if (nodeid == kControlIno) {
    // RunCommand takes mu_ itself.
    std::string_view cmd(reinterpret_cast<const char*>(w.data.data()),
                         w.data.size());
    if (!RunCommand(cmd)) return r.Error(EINVAL);
    return r.Written(w.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if (!S_ISREG(n->live.mode)) return r.Error(EINVAL);
  std::vector<uint8_t>& d = n->live.data;
  uint64_t end = w.offset() + w.size();
  MarkDirty(n, w.offset(), end);
  if (d.size() < end) d.resize(end, 0);
  std::memcpy(d.data() + w.offset(), w.data.data(), w.size());
  Now(&n->live.mtime, &n->live.mtimensec);
  if (w.in.flags & O_DSYNC) {  // O_SYNC includes the O_DSYNC bit
    // This write's own range (and the size it implies) is durable.
    std::vector<uint8_t>& dur = n->durable.data;
    if (dur.size() < end) dur.resize(end, 0);
    std::memcpy(dur.data() + w.offset(), w.data.data(), w.size());
  } else {
    last_write_ = {true, nodeid, w.offset(), w.size()};
  }
  r.Written(w.size());
}

void LossyFs::StatFs(Replier r, uint64_t) {
  std::lock_guard<std::mutex> lock(mu_);
  fuse_kstatfs st{};
  st.bsize = st.frsize = 4096;
  st.blocks = 1u << 20;
  st.bfree = st.bavail = (1u << 20) - 10;
  st.files = 1u << 20;
  st.ffree = st.files - nodes_.size();
  st.namelen = 255;
  r.Statfs(st);
}

void LossyFs::Fsync(Replier r, uint64_t nodeid, const fuse_fsync_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodeid == kControlIno) return r.Ok();
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  SyncDataLocked(n);
  // fsync keeps the inode's attributes too; fdatasync only what reading
  // the data back needs (the size).
  if (!(in.fsync_flags & FUSE_FSYNC_FDATASYNC)) KeepMeta(n->live, &n->durable);
  r.Ok();
}

void LossyFs::OpenDir(Replier r, uint64_t nodeid, const fuse_open_in&) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if (!S_ISDIR(n->live.mode)) return r.Error(ENOTDIR);
  fuse_open_out o{};
  o.fh = nodeid;
  r.Open(o);
}

void LossyFs::ReadDir(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(nodeid);
  if (!d || !S_ISDIR(d->live.mode)) return r.Error(ENOTDIR);
  auto buf = r.ReplyBuffer(in.size);
  if (buf.empty()) return r.Error(EINVAL);
  // Cookie i+1 continues after entry i; 0..1 are "." and "..".
  std::vector<std::pair<std::string, uint64_t>> all = {{".", d->ino},
                                                       {"..", kRootId}};
  for (auto& [name, ino] : d->live.children) all.emplace_back(name, ino);
  fuse::DirentEncoder enc(buf);
  for (size_t i = in.offset; i < all.size(); ++i) {
    uint32_t type = (Get(all[i].second)->live.mode & S_IFMT) >> 12;
    if (!enc.Add(all[i].second, all[i].first, type, i + 1)) break;
  }
  r.Data(enc.bytes());
}

void LossyFs::FsyncDir(Replier r, uint64_t nodeid, const fuse_fsync_in&) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  KeepMeta(n->live, &n->durable);
  n->durable.children = n->live.children;
  r.Ok();
}

void LossyFs::Fallocate(Replier r, uint64_t nodeid,
                        const fuse_fallocate_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if (!S_ISREG(n->live.mode)) return r.Error(ENODEV);
  std::vector<uint8_t>& d = n->live.data;
  uint64_t end = in.offset + in.length;
  if (in.mode == 0) {
    if (d.size() < end) {
      MarkDirty(n, d.size(), end);
      d.resize(end, 0);
    }
    return r.Ok();
  }
  if (in.mode == FALLOC_FL_KEEP_SIZE) return r.Ok();  // space only
  if (in.mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    uint64_t hi = std::min<uint64_t>(end, d.size());
    if (in.offset < hi) {
      MarkDirty(n, in.offset, hi);
      std::memset(d.data() + in.offset, 0, hi - in.offset);
    }
    return r.Ok();
  }
  r.Error(EOPNOTSUPP);
}

void LossyFs::SyncFs(Replier r, uint64_t) {
  Sync();
  r.Ok();
}

}  // namespace stripefs::lossyfs

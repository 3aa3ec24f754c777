#include "tests/fuse/mem_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "fuse/dirent_encoder.h"

namespace stripefs::fuse::testing {

using namespace fuse_abi;  // NOLINT

namespace {
void Now(uint64_t* s, uint32_t* ns) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  *s = static_cast<uint64_t>(ts.tv_sec);
  *ns = static_cast<uint32_t>(ts.tv_nsec);
}
bool ValidName(std::string_view n) {
  return !n.empty() && n.size() <= 255 && n != "." && n != "..";
}
}  // namespace

MemFs::MemFs(bool async) : async_(async) {
  auto root = std::make_unique<Node>();
  root->ino = kRootId;
  root->mode = S_IFDIR | 0777;
  root->nlink = 2;
  Now(&root->mtime, &root->mtimensec);
  root->atime = root->ctime = root->mtime;
  nodes_[kRootId] = std::move(root);
  if (async_) {
    worker_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(qmu_);
      for (;;) {
        qcv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
        if (queue_.empty()) return;
        auto fn = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        fn();
        lock.lock();
      }
    });
  }
}

MemFs::~MemFs() {
  {
    std::lock_guard<std::mutex> lock(qmu_);
    quit_ = true;
  }
  qcv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void MemFs::RunMaybeAsync(std::function<void()> fn) {
  if (!async_) return fn();
  {
    std::lock_guard<std::mutex> lock(qmu_);
    queue_.push_back(std::move(fn));
  }
  qcv_.notify_one();
}

void MemFs::Init(const NegotiatedInit& n) {
  std::lock_guard<std::mutex> lock(mu_);
  neg_ = n;
  inited_ = true;
}

NegotiatedInit MemFs::negotiated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return neg_;
}

MemFs::Node* MemFs::Get(uint64_t ino) {
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second.get();
}

fuse_attr MemFs::AttrOf(const Node& n) const {
  fuse_attr a{};
  a.ino = n.ino;
  a.mode = n.mode;
  a.nlink = n.nlink;
  a.uid = n.uid;
  a.gid = n.gid;
  a.rdev = n.rdev;
  a.size = S_ISLNK(n.mode) ? n.target.size() : n.data.size();
  a.blocks = (a.size + 511) / 512;
  a.blksize = 4096;
  a.atime = n.atime;
  a.mtime = n.mtime;
  a.ctime = n.ctime;
  a.atimensec = n.atimensec;
  a.mtimensec = n.mtimensec;
  a.ctimensec = n.ctimensec;
  return a;
}

fuse_entry_out MemFs::EntryOf(const Node& n) const {
  fuse_entry_out e{};
  e.nodeid = n.ino;
  e.generation = 1;
  e.entry_valid = 1;
  e.attr_valid = 1;
  e.attr = AttrOf(n);
  return e;
}

MemFs::Node* MemFs::NewNode(uint32_t mode, uint32_t uid, uint32_t gid) {
  auto n = std::make_unique<Node>();
  n->ino = next_ino_++;
  n->mode = mode;
  n->uid = uid;
  n->gid = gid;
  n->nlink = S_ISDIR(mode) ? 2 : 1;
  Now(&n->mtime, &n->mtimensec);
  n->atime = n->ctime = n->mtime;
  n->atimensec = n->ctimensec = n->mtimensec;
  Node* p = n.get();
  nodes_[p->ino] = std::move(n);
  return p;
}

void MemFs::KillPrivLocked(Node* n) {
  n->mode = ModeAfterKillPriv(n->mode);
  n->xattrs.erase(std::string(kCapabilityXattr));
}

void MemFs::Lookup(Replier r, uint64_t parent, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(parent);
  if (!d || !S_ISDIR(d->mode)) return r.Error(ENOTDIR);
  auto it = d->children.find(std::string(name));
  if (it == d->children.end()) return r.Error(ENOENT);
  r.Entry(EntryOf(*Get(it->second)));
}

void MemFs::Forget(uint64_t, uint64_t) {}

void MemFs::GetAttr(Replier r, uint64_t nodeid, const fuse_getattr_in&) {
  auto rp = std::make_shared<Replier>(std::move(r));
  RunMaybeAsync([this, rp, nodeid] {
    std::lock_guard<std::mutex> lock(mu_);
    Node* n = Get(nodeid);
    if (!n) return rp->Error(ENOENT);
    fuse_attr_out a{};
    a.attr_valid = 1;
    a.attr = AttrOf(*n);
    rp->Attr(a);
  });
}

void MemFs::SetAttr(Replier r, uint64_t nodeid, const fuse_setattr_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if (in.valid & FATTR_MODE) {
    n->mode = (n->mode & S_IFMT) | (in.mode & 07777);
  } else if (in.valid & FATTR_KILL_SUIDGID) {
    KillPrivLocked(n);
  }
  if (in.valid & FATTR_UID) n->uid = in.uid;
  if (in.valid & FATTR_GID) n->gid = in.gid;
  if (in.valid & FATTR_SIZE) {
    if (!S_ISREG(n->mode)) return r.Error(EINVAL);
    n->data.resize(in.size, 0);
    Now(&n->mtime, &n->mtimensec);
  }
  if (in.valid & FATTR_ATIME) {
    n->atime = in.atime;
    n->atimensec = in.atimensec;
  }
  if (in.valid & FATTR_ATIME_NOW) Now(&n->atime, &n->atimensec);
  if (in.valid & FATTR_MTIME) {
    n->mtime = in.mtime;
    n->mtimensec = in.mtimensec;
  }
  if (in.valid & FATTR_MTIME_NOW) Now(&n->mtime, &n->mtimensec);
  Now(&n->ctime, &n->ctimensec);
  fuse_attr_out a{};
  a.attr_valid = 1;
  a.attr = AttrOf(*n);
  r.Attr(a);
}

void MemFs::ReadLink(Replier r, uint64_t nodeid) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n || !S_ISLNK(n->mode)) return r.Error(EINVAL);
  r.Data(std::string_view(n->target));
}

void MemFs::MakeNode(Replier r, uint64_t parent, std::string_view name,
                     uint32_t mode, std::string_view target) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(parent);
  if (!d || !S_ISDIR(d->mode)) return r.Error(ENOTDIR);
  if (!ValidName(name)) return r.Error(EINVAL);
  if (d->children.count(std::string(name))) return r.Error(EEXIST);
  Node* n = NewNode(mode, r.ctx().uid, r.ctx().gid);
  n->target = std::string(target);
  d->children[std::string(name)] = n->ino;
  if (S_ISDIR(mode)) d->nlink++;
  Now(&d->mtime, &d->mtimensec);
  r.Entry(EntryOf(*n));
}

void MemFs::Symlink(Replier r, uint64_t parent, std::string_view name,
                    std::string_view target) {
  MakeNode(std::move(r), parent, name, S_IFLNK | 0777, target);
}

void MemFs::Mknod(Replier r, uint64_t parent, std::string_view name,
                  const fuse_mknod_in& in) {
  if (!S_ISREG(in.mode) && !S_ISFIFO(in.mode)) return r.Error(EPERM);
  MakeNode(std::move(r), parent, name, in.mode & ~in.umask, {});
}

void MemFs::Mkdir(Replier r, uint64_t parent, std::string_view name,
                  const fuse_mkdir_in& in) {
  MakeNode(std::move(r), parent, name, S_IFDIR | (in.mode & ~in.umask & 07777),
           {});
}

void MemFs::Unlink(Replier r, uint64_t parent, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(parent);
  if (!d) return r.Error(ENOENT);
  auto it = d->children.find(std::string(name));
  if (it == d->children.end()) return r.Error(ENOENT);
  Node* n = Get(it->second);
  if (S_ISDIR(n->mode)) return r.Error(EISDIR);
  n->nlink--;
  d->children.erase(it);
  r.Ok();
}

void MemFs::Rmdir(Replier r, uint64_t parent, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(parent);
  if (!d) return r.Error(ENOENT);
  auto it = d->children.find(std::string(name));
  if (it == d->children.end()) return r.Error(ENOENT);
  Node* n = Get(it->second);
  if (!S_ISDIR(n->mode)) return r.Error(ENOTDIR);
  if (!n->children.empty()) return r.Error(ENOTEMPTY);
  d->children.erase(it);
  d->nlink--;
  r.Ok();
}

void MemFs::Rename(Replier r, uint64_t olddir, std::string_view oldname,
                   uint64_t newdir, std::string_view newname, uint32_t flags) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* od = Get(olddir);
  Node* nd = Get(newdir);
  if (!od || !nd) return r.Error(ENOENT);
  if (flags & ~(kRenameNoReplace | kRenameExchange)) return r.Error(EINVAL);
  auto oit = od->children.find(std::string(oldname));
  if (oit == od->children.end()) return r.Error(ENOENT);
  auto nit = nd->children.find(std::string(newname));
  if (flags & kRenameExchange) {
    if (nit == nd->children.end()) return r.Error(ENOENT);
    std::swap(oit->second, nit->second);
    return r.Ok();
  }
  if (nit != nd->children.end()) {
    if (flags & kRenameNoReplace) return r.Error(EEXIST);
    Node* victim = Get(nit->second);
    if (S_ISDIR(victim->mode)) {
      if (!victim->children.empty()) return r.Error(ENOTEMPTY);
      nd->nlink--;
    } else {
      victim->nlink--;
    }
  }
  uint64_t ino = oit->second;
  od->children.erase(oit);
  nd->children[std::string(newname)] = ino;
  if (S_ISDIR(Get(ino)->mode) && od != nd) {
    od->nlink--;
    nd->nlink++;
  }
  r.Ok();
}

void MemFs::Link(Replier r, uint64_t oldnode, uint64_t newparent,
                 std::string_view newname) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(oldnode);
  Node* d = Get(newparent);
  if (!n || !d) return r.Error(ENOENT);
  if (d->children.count(std::string(newname))) return r.Error(EEXIST);
  d->children[std::string(newname)] = n->ino;
  n->nlink++;
  r.Entry(EntryOf(*n));
}

void MemFs::Open(Replier r, uint64_t nodeid, const fuse_open_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if ((in.flags & O_TRUNC) && S_ISREG(n->mode)) n->data.clear();
  if (in.open_flags & FUSE_OPEN_KILL_SUIDGID) KillPrivLocked(n);
  fuse_open_out o{};
  o.fh = nodeid;
  r.Open(o);
}

void MemFs::Create(Replier r, uint64_t parent, std::string_view name,
                   const fuse_create_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(parent);
  if (!d || !S_ISDIR(d->mode)) return r.Error(ENOTDIR);
  if (!ValidName(name)) return r.Error(EINVAL);
  if (d->children.count(std::string(name))) return r.Error(EEXIST);
  Node* n = NewNode(S_IFREG | (in.mode & ~in.umask & 07777), r.ctx().uid,
                    r.ctx().gid);
  d->children[std::string(name)] = n->ino;
  fuse_open_out o{};
  o.fh = n->ino;
  r.Create(EntryOf(*n), o);
}

void MemFs::Read(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  auto rp = std::make_shared<Replier>(std::move(r));
  RunMaybeAsync([this, rp, nodeid, in] {
    std::lock_guard<std::mutex> lock(mu_);
    Node* n = Get(nodeid);
    if (!n) return rp->Error(ENOENT);
    if (in.offset >= n->data.size())
      return rp->Data(std::span<const uint8_t>());
    size_t len = std::min<size_t>(in.size, n->data.size() - in.offset);
    // Build the reply in the transport's buffer (zero-copy on io-uring).
    auto buf = rp->ReplyBuffer(len);
    if (buf.size() == len) {
      std::memcpy(buf.data(), n->data.data() + in.offset, len);
      rp->Data(std::span<const uint8_t>(buf.data(), len));
    } else {
      rp->Data(std::span<const uint8_t>(n->data.data() + in.offset, len));
    }
  });
}

void MemFs::SetContentForTest(uint64_t ino, const std::string& content) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(ino);
  if (n) n->data.assign(content.begin(), content.end());
}

void MemFs::Write(Replier r, uint64_t nodeid, const WriteRequest& w) {
  writes_++;
  uint32_t prev = max_write_size_.load();
  while (w.size() > prev &&
         !max_write_size_.compare_exchange_weak(prev, w.size())) {
  }
  if (w.is_writeback()) writeback_writes_++;
  if (reinterpret_cast<uintptr_t>(w.data.data()) % 4096 == 0)
    page_aligned_writes_++;
  auto rp = std::make_shared<Replier>(std::move(r));
  // The data view stays valid until the reply, also when async.
  RunMaybeAsync([this, rp, nodeid, w] {
    std::lock_guard<std::mutex> lock(mu_);
    Node* n = Get(nodeid);
    if (!n) return rp->Error(ENOENT);
    uint64_t end = w.offset() + w.size();
    if (n->data.size() < end) n->data.resize(end, 0);
    std::memcpy(n->data.data() + w.offset(), w.data.data(), w.size());
    if (w.kill_suidgid()) KillPrivLocked(n);
    Now(&n->mtime, &n->mtimensec);
    rp->Written(w.size());
  });
}

void MemFs::StatFs(Replier r, uint64_t) {
  std::lock_guard<std::mutex> lock(mu_);
  fuse_kstatfs st{};
  st.bsize = 4096;
  st.frsize = 4096;
  st.blocks = 1u << 20;
  st.bfree = st.bavail = (1u << 20) - 10;
  st.files = 1u << 16;
  st.ffree = st.files - nodes_.size();
  st.namelen = 255;
  r.Statfs(st);
}

void MemFs::SetXattr(Replier r, uint64_t nodeid, std::string_view name,
                     std::span<const uint8_t> value,
                     const fuse_setxattr_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  std::string key(name);
  bool exists = n->xattrs.count(key) != 0;
  if ((in.flags & XATTR_CREATE) && exists) return r.Error(EEXIST);
  if ((in.flags & XATTR_REPLACE) && !exists) return r.Error(ENODATA);
  n->xattrs[key].assign(value.begin(), value.end());
  r.Ok();
}

void MemFs::GetXattr(Replier r, uint64_t nodeid, std::string_view name,
                     uint32_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  auto it = n->xattrs.find(std::string(name));
  if (it == n->xattrs.end()) return r.Error(ENODATA);
  if (size == 0) return r.XattrSize(static_cast<uint32_t>(it->second.size()));
  if (size < it->second.size()) return r.Error(ERANGE);
  r.Data(std::span<const uint8_t>(it->second));
}

void MemFs::ListXattr(Replier r, uint64_t nodeid, uint32_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  std::string list;
  for (auto& [k, v] : n->xattrs) {
    list += k;
    list.push_back('\0');
  }
  if (size == 0) return r.XattrSize(static_cast<uint32_t>(list.size()));
  if (size < list.size()) return r.Error(ERANGE);
  r.Data(std::string_view(list));
}

void MemFs::RemoveXattr(Replier r, uint64_t nodeid, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if (n->xattrs.erase(std::string(name)) == 0) return r.Error(ENODATA);
  r.Ok();
}

void MemFs::OpenDir(Replier r, uint64_t nodeid, const fuse_open_in&) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if (!S_ISDIR(n->mode)) return r.Error(ENOTDIR);
  fuse_open_out o{};
  o.fh = nodeid;
  r.Open(o);
}

void MemFs::DoReadDir(Replier r, uint64_t nodeid, const fuse_read_in& in,
                      bool plus) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* d = Get(nodeid);
  if (!d || !S_ISDIR(d->mode)) return r.Error(ENOTDIR);
  auto buf = r.ReplyBuffer(in.size);
  if (buf.empty()) return r.Error(EINVAL);
  // Cookie i+1 continues after entry i; 0..1 are "." and "..".
  std::vector<std::pair<std::string, uint64_t>> all = {{".", d->ino},
                                                       {"..", kRootId}};
  for (auto& [name, ino] : d->children) all.emplace_back(name, ino);
  DirentEncoder enc(buf);
  DirentPlusEncoder penc(buf);
  for (size_t i = in.offset; i < all.size(); ++i) {
    Node* n = Get(all[i].second);
    uint32_t type = (n->mode & S_IFMT) >> 12;
    bool ok;
    if (plus) {
      fuse_entry_out e{};
      if (i >= 2) {
        e = EntryOf(*n);  // counts as a lookup
      } else {
        e.attr.ino = n->ino;
        e.attr.mode = n->mode;
      }
      ok = penc.Add(e, all[i].first, type, i + 1);
    } else {
      ok = enc.Add(n->ino, all[i].first, type, i + 1);
    }
    if (!ok) break;
  }
  r.Data(plus ? penc.bytes() : enc.bytes());
}

void MemFs::ReadDir(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  DoReadDir(std::move(r), nodeid, in, false);
}

void MemFs::ReadDirPlus(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  readdirplus_++;
  DoReadDir(std::move(r), nodeid, in, true);
}

void MemFs::Fallocate(Replier r, uint64_t nodeid, const fuse_fallocate_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  if (in.mode & ~FALLOC_FL_KEEP_SIZE) return r.Error(EOPNOTSUPP);
  uint64_t end = in.offset + in.length;
  if (!(in.mode & FALLOC_FL_KEEP_SIZE) && n->data.size() < end) {
    n->data.resize(end, 0);
  }
  r.Ok();
}

void MemFs::Lseek(Replier r, uint64_t nodeid, const fuse_lseek_in& in) {
  std::lock_guard<std::mutex> lock(mu_);
  Node* n = Get(nodeid);
  if (!n) return r.Error(ENOENT);
  uint64_t size = n->data.size();
  if (in.offset >= size) return r.Error(ENXIO);
  if (in.whence == SEEK_DATA) return r.Lseek(in.offset);
  if (in.whence == SEEK_HOLE) return r.Lseek(size);
  r.Error(EINVAL);
}

}  // namespace stripefs::fuse::testing

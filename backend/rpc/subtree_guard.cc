#include "backend/rpc/subtree_guard.h"

#include <sys/stat.h>

#include <algorithm>

#include "backend/meta/meta_types.h"

namespace stripefs::rpc {

Status SubtreeGuard::Limit::Refuse(uint64_t ino, const char* what) const {
  return Status(EACCES, "inode " + std::to_string(ino) + " is " + what +
                            " the subtree " + path_ + " of " + entity_ +
                            " (look it up by name from inside " + path_ +
                            "; the identity was added with --path " + path_ +
                            ")");
}

Status SubtreeGuard::Limit::Dir(uint64_t dir) const {
  for (bool fresh : {false, true}) {
    auto r = g_->Resolve(entity_, path_, fresh);
    if (!r.ok())
      return Status(EACCES, entity_ + " may reach only " + path_ + ": " +
                                r.status().message());
    auto under = g_->Under(dir, r->root);
    if (under.ok() && *under) return Status::Ok();
  }
  return Refuse(dir, "not a directory in");
}

Status SubtreeGuard::Limit::Node(uint64_t ino) const {
  if (g_->WasReached(entity_, path_, ino)) return Status::Ok();
  for (bool fresh : {false, true}) {
    auto r = g_->Resolve(entity_, path_, fresh);
    if (!r.ok())
      return Status(EACCES, entity_ + " may reach only " + path_ + ": " +
                                r.status().message());
    auto under = g_->Under(ino, r->root);
    if (under.ok() && *under) return Status::Ok();
    if (!under.ok() && under.status().code() == ENOTDIR)
      return Refuse(ino, "a file this client did not reach through");
  }
  return Refuse(ino, "outside");
}

Status SubtreeGuard::Limit::Visible(uint64_t ino) const {
  auto r = g_->Resolve(entity_, path_, false);
  if (r.ok() &&
      std::find(r->on_way.begin(), r->on_way.end(), ino) != r->on_way.end())
    return Status::Ok();
  return Node(ino);
}

Status SubtreeGuard::Limit::Looked(uint64_t parent, const std::string& name,
                                   const Result<InodeAttr>& found) const {
  auto r = g_->Resolve(entity_, path_, false);
  if (r.ok() && std::find(r->on_way.begin(), r->on_way.end(), parent) !=
                    r->on_way.end()) {
    // On the way down: only the next step of the path is visible.
    bool next = found.ok() && (found->ino == r->root ||
                               std::find(r->on_way.begin(), r->on_way.end(),
                                         found->ino) != r->on_way.end());
    if (next) return Status::Ok();
    return Status(EACCES, "'" + name + "' is outside the subtree " + path_ +
                              " of " + entity_);
  }
  STRIPEFS_RETURN_IF_ERROR(Dir(parent));
  if (!found.ok()) return found.status();
  if (name == "..") return Dir(found->ino);  // '..' of the root is outside
  if (!S_ISDIR(found->mode)) Reached(found->ino);
  return Status::Ok();
}

void SubtreeGuard::Limit::Reached(uint64_t ino) const {
  g_->Remember(entity_, path_, ino);
}

SubtreeGuard::Scope& SubtreeGuard::ScopeLocked(const std::string& entity,
                                               const std::string& path) {
  Scope& s = scopes_[entity];
  if (s.path != path) s = Scope{path, 0, {}, {}};
  return s;
}

void SubtreeGuard::Forget(const std::string& entity) {
  MutexLock lock(&mu_);
  scopes_.erase(entity);
}

bool SubtreeGuard::WasReached(const std::string& entity,
                              const std::string& path, uint64_t ino) {
  MutexLock lock(&mu_);
  return ScopeLocked(entity, path).reached.count(ino) != 0;
}

void SubtreeGuard::Remember(const std::string& entity, const std::string& path,
                            uint64_t ino) {
  MutexLock lock(&mu_);
  Scope& s = ScopeLocked(entity, path);
  if (s.reached.size() >= kMaxReachedPerIdentity) s.reached.clear();
  s.reached.insert(ino);
}

Result<SubtreeGuard::Resolved> SubtreeGuard::Resolve(const std::string& entity,
                                                     const std::string& path,
                                                     bool fresh) {
  if (!fresh) {
    MutexLock lock(&mu_);
    Scope& s = ScopeLocked(entity, path);
    if (s.root != 0) return Resolved{s.root, s.on_way};
  }
  STRIPEFS_ASSIGN_OR_RETURN(Resolved r, ResolveByName(path));
  MutexLock lock(&mu_);
  Scope& s = ScopeLocked(entity, path);
  s.root = r.root;
  s.on_way = r.on_way;
  return r;
}

Result<SubtreeGuard::Resolved> SubtreeGuard::ResolveByName(
    const std::string& path) {
  Resolved r;
  uint64_t cur = kRootInode;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t start = path.find_first_not_of('/', pos);
    if (start == std::string::npos) break;
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    pos = end;
    auto next = service_->Lookup(cur, part);
    if (!next.ok())
      return Status(next.status().code(),
                    "its subtree " + path + " cannot be resolved (" +
                        next.status().message() +
                        "; create it with an admin or the server key)");
    if (!S_ISDIR(next->mode))
      return Status(ENOTDIR, "its subtree " + path + " is not a directory");
    r.on_way.push_back(cur);
    cur = next->ino;
  }
  r.root = cur;
  return r;
}

Result<bool> SubtreeGuard::Under(uint64_t dir, uint64_t root) {
  uint64_t cur = dir;
  for (int depth = 0; depth < kMaxSubtreeDepth; ++depth) {
    if (cur == root) return true;
    if (cur == kRootInode) return false;
    STRIPEFS_ASSIGN_OR_RETURN(InodeAttr up, service_->Lookup(cur, ".."));
    if (up.ino == cur) return false;
    cur = up.ino;
  }
  return false;
}

}  // namespace stripefs::rpc

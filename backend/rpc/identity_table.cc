#include "backend/rpc/identity_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

namespace stripefs::rpc {
namespace {

std::string Hex(const EntitySalt& b) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s += d[x >> 4];
    s += d[x & 15];
  }
  return s;
}

bool Unhex(const std::string& s, EntitySalt* out) {
  if (s.size() != 2 * out->size()) return false;
  for (size_t i = 0; i < out->size(); ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    (*out)[i] = static_cast<uint8_t>(v);
  }
  return true;
}

Status CheckPath(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.find('\n') != std::string::npos ||
      p.find("/../") != std::string::npos || p.ends_with("/.."))
    return Status::InvalidArgument("--path '" + p +
                                   "' must be an absolute path without "
                                   "'..' (e.g. /home/alice)");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<IdentityTable>> IdentityTable::Open(std::string file) {
  std::unique_ptr<IdentityTable> t(new IdentityTable(file));
  std::ifstream in(file);
  if (!in) {
    if (errno == ENOENT) return t;
    int err = errno;
    return Status(err, "cannot read identity table '" + file +
                           "': " + std::strerror(err));
  }
  // One row per line: entity, salt (hex), read-only (0/1), path (the rest).
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    Row row;
    std::string salt;
    int ro = -1;
    ls >> row.record.entity >> salt >> ro;
    std::getline(ls >> std::ws, row.record.path);
    auto p = ParseEntity(row.record.entity);
    if (!p.ok() || *p == Principal::kServer || !Unhex(salt, &row.salt) ||
        (ro != 0 && ro != 1) || !CheckPath(row.record.path).ok()) {
      return Status(EBADMSG, "identity table '" + file + "' line " +
                                 std::to_string(n) +
                                 " is malformed; restore it from a backup "
                                 "or remove the line and re-add the "
                                 "identity with `stripefs auth add`");
    }
    row.record.read_only = ro == 1;
    std::string name = row.record.entity;
    t->rows_[name] = std::move(row);
  }
  return t;
}

Status IdentityTable::SaveLocked() const {
  std::string text =
      "# stripefs identity table: entity salt read-only path (no secrets)\n";
  for (const auto& [name, row] : rows_) {
    text += name + " " + Hex(row.salt) + " " +
            (row.record.read_only ? "1 " : "0 ") + row.record.path + "\n";
  }
  const std::string tmp = file_ + ".tmp";
  int fd = ::open(tmp.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int err = errno;
    return Status(err, "cannot write identity table '" + tmp +
                           "': " + std::strerror(err));
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = done == text.size() && ::fsync(fd) == 0;
  int err = errno;
  ok = (::close(fd) == 0) && ok;
  if (ok && ::rename(tmp.c_str(), file_.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status(err, "cannot write identity table '" + file_ +
                           "': " + std::strerror(err));
  }
  return Status::Ok();
}

Status IdentityTable::Add(const IdentityRecord& r, const EntitySalt& salt) {
  STRIPEFS_ASSIGN_OR_RETURN(Principal p, ParseEntity(r.entity));
  if (p == Principal::kServer)
    return Status::InvalidArgument(
        "\"server\" is the server key; add client.NAME or admin.NAME");
  STRIPEFS_RETURN_IF_ERROR(CheckPath(r.path));
  std::unique_lock lock(mu_);
  if (rows_.count(r.entity))
    return Status::Exists("identity " + r.entity +
                          " exists; `stripefs auth rm " + r.entity +
                          "` first to give it a new key");
  rows_[r.entity] = Row{salt, r};
  Status s = SaveLocked();
  if (!s.ok()) rows_.erase(r.entity);
  return s;
}

Status IdentityTable::Remove(const std::string& entity,
                             EntitySalt* removed_salt) {
  std::unique_lock lock(mu_);
  auto it = rows_.find(entity);
  if (it == rows_.end())
    return Status::NotFound("no identity " + entity +
                            " (`stripefs auth ls` lists them)");
  Row saved = it->second;
  rows_.erase(it);
  Status s = SaveLocked();
  if (!s.ok()) rows_[entity] = saved;
  if (s.ok() && removed_salt) *removed_salt = saved.salt;
  return s;
}

std::vector<IdentityRecord> IdentityTable::List() const {
  std::shared_lock lock(mu_);
  std::vector<IdentityRecord> out;
  for (const auto& [name, row] : rows_) out.push_back(row.record);
  return out;
}

std::optional<IdentityRecord> IdentityTable::Find(const Caller& c) const {
  std::shared_lock lock(mu_);
  auto it = rows_.find(c.entity);
  if (it == rows_.end() || it->second.salt != c.salt) return std::nullopt;
  return it->second.record;
}

Status IdentityTable::Admit(const Caller& c) const {
  if (c.principal == Principal::kServer) return Status::Ok();
  if (Find(c)) return Status::Ok();
  return Status(EKEYREVOKED,
                "identity " + c.entity +
                    " is not in metad's identity table (removed with "
                    "`stripefs auth rm`, or made for another cluster); an "
                    "operator can issue a new one with `stripefs auth add " +
                    c.entity + "`");
}

size_t IdentityTable::size() const {
  std::shared_lock lock(mu_);
  return rows_.size();
}

}  // namespace stripefs::rpc

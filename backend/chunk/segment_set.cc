#include "backend/chunk/segment_set.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"

namespace stripefs {

using chunk_paths::FsyncDir;
using chunk_paths::IsNoSpace;

SegmentSet::SegmentSet(std::string dir, const Options& options)
    : dir_(std::move(dir)), options_(options) {}

SegmentSet::~SegmentSet() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  stop_fill_.store(true);
  fill_cv_.notify_all();
  if (filler_.joinable()) filler_.join();
}

Result<std::shared_ptr<SegmentFile>> SegmentSet::OpenFile(uint64_t seq,
                                                          bool create) {
  auto f = std::make_shared<SegmentFile>();
  f->seq = seq;
  f->path = dir_ + "/" + chunk_paths::SegmentFileName(seq);
  // Created without O_DIRECT: a file system refusing O_DIRECT (tmpfs before
  // Linux 6.6) fails the open only after creating the file, so a retry of
  // O_CREAT | O_EXCL without it would fail with EEXIST.
  // Read-write: small writes go through the page cache (ChunkStoreOptions::
  // buffered_write_max_bytes).
  f->buffered_fd.Reset(
      ::open(f->path.c_str(),
             O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0644));
  if (!f->buffered_fd.valid()) {
    return Status::FromErrno(errno, "open segment " + f->path);
  }
  if (options_.use_direct_io) {
    f->write_fd.Reset(::open(f->path.c_str(), O_RDWR | O_CLOEXEC | O_DIRECT));
    f->direct = f->write_fd.valid();
  }
  if (!f->write_fd.valid()) {
    // No O_DIRECT here (EINVAL, e.g. tmpfs before 6.6): buffered writes.
    f->write_fd.Reset(::open(f->path.c_str(), O_RDWR | O_CLOEXEC));
  }
  if (!f->write_fd.valid()) {
    return Status::FromErrno(errno, "open segment " + f->path);
  }
  // No kernel read-ahead: a segment holds the chunks of many stripes, data
  // and parity interleaved in write order, so reading ahead of one chunk
  // mostly fetches chunks nobody asked for (a cold 1 MiB sequential read
  // through a 4+2 mount read 1.7x its bytes from the disk). Every read
  // still fetches its whole range in one request; the client reads ahead
  // whole stripes itself. Advice only: a refusal changes nothing else.
  (void)::posix_fadvise(f->buffered_fd.get(), 0, 0, POSIX_FADV_RANDOM);
  return f;
}

Result<std::vector<uint64_t>> SegmentSet::Load(
    const std::map<uint64_t, SegmentUsage>& usage, uint64_t* removed) {
  MutexLock lock(&mu_);
  *removed = 0;
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> names,
                            chunk_paths::ListDir(dir_));
  for (const auto& n : names) {
    uint64_t seq;
    if (chunk_paths::ParseSpareTmpFileName(n, &seq)) {
      ::unlink((dir_ + "/" + n).c_str());  // its filler did not finish
      continue;
    }
    if (chunk_paths::ParseSpareFileName(n, &seq)) {
      next_spare_ = std::max(next_spare_, seq + 1);
      if (spares_.size() < options_.spare_segments) {
        spares_.push_back(dir_ + "/" + n);
      } else {
        ::unlink((dir_ + "/" + n).c_str());
      }
      continue;
    }
    if (!chunk_paths::ParseSegmentFileName(n, &seq)) continue;
    next_seq_ = std::max(next_seq_, seq + 1);
    const std::string path = dir_ + "/" + n;
    auto u = usage.find(seq);
    if (u == usage.end() || u->second.live_entries == 0) {
      // Written by a batch that never committed, or emptied before a crash.
      if (::unlink(path.c_str()) == 0) ++*removed;
      continue;
    }
    STRIPEFS_ASSIGN_OR_RETURN(std::shared_ptr<SegmentFile> f,
                              OpenFile(seq, false));
    struct stat st;
    if (::fstat(f->buffered_fd.get(), &st) != 0) {
      return Status::FromErrno(errno, "fstat " + path);
    }
    // Past the last committed entry is garbage (and preallocation).
    if (static_cast<uint64_t>(st.st_size) > u->second.end &&
        ::ftruncate(f->write_fd.get(), static_cast<off_t>(u->second.end)) !=
            0) {
      return Status::FromErrno(errno, "truncate " + path);
    }
    Segment s;
    s.file = std::move(f);
    s.usage = u->second;
    s.capacity = u->second.end;
    s.sealed = true;
    segments_.emplace(seq, std::move(s));
  }
  std::vector<uint64_t> missing;
  for (const auto& [seq, u] : usage) {
    if (u.live_entries > 0 && !segments_.count(seq)) missing.push_back(seq);
    next_seq_ = std::max(next_seq_, seq + 1);
  }
  removed_ += *removed;
  return missing;
}

void SegmentSet::SealActiveLocked() {
  if (active_ == 0) return;
  Segment& s = segments_[active_];
  s.sealed = true;
  // Give back the preallocated tail (pending extents all lie below end).
  if (s.capacity > s.usage.end && s.capacity != UINT64_MAX) {
    if (::ftruncate(s.file->write_fd.get(), static_cast<off_t>(s.usage.end)) ==
        0) {
      s.capacity = s.usage.end;
    }
  }
  const uint64_t was = active_;
  active_ = 0;
  MaybeRemoveLocked(was);
}

std::shared_ptr<SegmentFile> SegmentSet::TakeSpareLocked(uint64_t seq,
                                                         uint64_t at_least,
                                                         uint64_t* capacity) {
  while (!spares_.empty()) {
    const std::string spare = std::move(spares_.back());
    spares_.pop_back();
    fill_cv_.notify_all();
    struct stat st;
    if (::stat(spare.c_str(), &st) != 0 ||
        static_cast<uint64_t>(st.st_size) < at_least) {
      ::unlink(spare.c_str());
      continue;
    }
    const std::string path = dir_ + "/" + chunk_paths::SegmentFileName(seq);
    if (::rename(spare.c_str(), path.c_str()) != 0) {
      ::unlink(spare.c_str());
      continue;
    }
    auto f = OpenFile(seq, false);
    if (!f.ok()) {
      ::unlink(path.c_str());
      continue;
    }
    *capacity =
        static_cast<uint64_t>(st.st_size) / kSegmentAlign * kSegmentAlign;
    ++rolled_onto_spares_;
    return *f;
  }
  return nullptr;
}

Status SegmentSet::Roll(uint64_t at_least) {
  SealActiveLocked();
  at_least = std::max<uint64_t>(at_least, kSegmentAlign);
  const uint64_t seq = next_seq_++;
  uint64_t capacity = 0;
  std::shared_ptr<SegmentFile> f = TakeSpareLocked(seq, at_least, &capacity);
  if (!f) {
    STRIPEFS_ASSIGN_OR_RETURN(f, OpenFile(seq, true));
    capacity = std::max(options_.segment_bytes, at_least);
    if (::fallocate(f->write_fd.get(), 0, 0, static_cast<off_t>(capacity)) !=
        0) {
      int err = errno;
      // Nearly full: a segment just big enough for this write.
      if (IsNoSpace(err) && capacity > at_least &&
          ::fallocate(f->write_fd.get(), 0, 0, static_cast<off_t>(at_least)) ==
              0) {
        capacity = at_least;
      } else if (err == EOPNOTSUPP) {
        capacity = UINT64_MAX;  // no preallocation: the file grows as written
      } else {
        ::unlink(f->path.c_str());
        return Status::FromErrno(err, "preallocate segment " + f->path);
      }
    }
  }
  // The segment's name must survive a crash before any entry points into it.
  Status st = FsyncDir(dir_);
  if (!st.ok()) {
    ::unlink(f->path.c_str());
    return st.Annotate("new segment " + f->path);
  }
  Segment s;
  s.file = std::move(f);
  s.capacity = capacity;
  segments_.emplace(seq, std::move(s));
  active_ = seq;
  ++rolls_;
  fill_cv_.notify_all();
  return Status::Ok();
}

void SegmentSet::StartFiller() {
  if (options_.spare_segments == 0 || filler_.joinable()) return;
  filler_ = std::thread([this] { FillLoop(); });
}

bool SegmentSet::RoomForSpare() const {
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) != 0) return false;
  const uint64_t avail =
      static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  return avail >= options_.spare_min_free_bytes + options_.segment_bytes;
}

void SegmentSet::FillLoop() {
  UniqueMutexLock lock(&mu_);
  while (!stop_) {
    // Only a store being written (it filled a segment since open) gets
    // spares: idle and test stores cost no zero-filling.
    if (rolls_ < 2 || spares_.size() >= options_.spare_segments) {
      fill_cv_.wait(lock.native());
      continue;
    }
    const uint64_t n = next_spare_++;
    lock.Unlock();
    Result<std::string> path =
        RoomForSpare() ? FillSpare(n)
                       : Result<std::string>(Status::NoSpace("free space"));
    lock.Lock();
    if (path.ok()) {
      spares_.push_back(std::move(*path));
      ++spares_filled_;
    } else {
      // Full disk or I/O error: segments are preallocated meanwhile.
      fill_cv_.wait_for(lock.native(), std::chrono::seconds(5));
    }
  }
}

Result<std::string> SegmentSet::FillSpare(uint64_t n) {
  const std::string tmp = dir_ + "/" + chunk_paths::SpareTmpFileName(n);
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  UniqueFd fd(::open(tmp.c_str(), flags | O_DIRECT, 0644));
  if (!fd.valid()) fd.Reset(::open(tmp.c_str(), flags, 0644));
  if (!fd.valid()) return Status::FromErrno(errno, "create spare " + tmp);
  auto fail = [&](int err, const char* what) {
    ::unlink(tmp.c_str());
    return Status::FromErrno(err, std::string(what) + " spare " + tmp);
  };
  constexpr size_t kBlock = size_t{1} << 20;
  void* raw = nullptr;
  if (::posix_memalign(&raw, kSegmentAlign, kBlock) != 0) {
    return fail(ENOMEM, "buffer for");
  }
  std::unique_ptr<void, decltype(&std::free)> zeros(raw, &std::free);
  std::memset(raw, 0, kBlock);
  for (uint64_t off = 0; off < options_.segment_bytes; off += kBlock) {
    if (stop_fill_.load()) return fail(ECANCELED, "stopped filling");
    const size_t len = static_cast<size_t>(
        std::min<uint64_t>(kBlock, options_.segment_bytes - off));
    if (::pwrite(fd.get(), raw, len, static_cast<off_t>(off)) !=
        static_cast<ssize_t>(len)) {
      return fail(errno ? errno : EIO, "write");
    }
  }
  if (::fdatasync(fd.get()) != 0) return fail(errno, "sync");
  const std::string path = dir_ + "/" + chunk_paths::SpareFileName(n);
  // No directory sync: a crash before the next Roll's leaves a tmp name,
  // which Load removes.
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(errno, "rename");
  return path;
}

Result<SegmentExtent> SegmentSet::Allocate(uint64_t bytes) {
  if (bytes == 0) return SegmentExtent{};  // nothing to store anywhere
  MutexLock lock(&mu_);
  if (active_ == 0 ||
      segments_[active_].capacity - segments_[active_].usage.end < bytes) {
    STRIPEFS_RETURN_IF_ERROR(Roll(bytes));
  }
  Segment& s = segments_[active_];
  SegmentExtent e{active_, s.usage.end, bytes};
  s.usage.end += bytes;
  ++s.pending;
  return e;
}

void SegmentSet::Settle(const SegmentExtent& e) {
  MutexLock lock(&mu_);
  auto it = segments_.find(e.segment);
  if (it == segments_.end()) return;
  --it->second.pending;
  MaybeRemoveLocked(e.segment);
}

void SegmentSet::AddLive(uint64_t seq, uint64_t bytes, uint64_t entries) {
  MutexLock lock(&mu_);
  auto it = segments_.find(seq);
  if (it == segments_.end()) return;
  it->second.usage.live_bytes += bytes;
  it->second.usage.live_entries += entries;
}

void SegmentSet::RemoveLive(uint64_t seq, uint64_t bytes, uint64_t entries) {
  MutexLock lock(&mu_);
  auto it = segments_.find(seq);
  if (it == segments_.end()) return;
  SegmentUsage& u = it->second.usage;
  u.live_bytes -= std::min(u.live_bytes, bytes);
  u.live_entries -= std::min(u.live_entries, entries);
  MaybeRemoveLocked(seq);
}

void SegmentSet::NotePunched(uint64_t seq, uint64_t bytes) {
  MutexLock lock(&mu_);
  auto it = segments_.find(seq);
  if (it != segments_.end()) it->second.usage.punched += bytes;
}

void SegmentSet::SealActive() {
  MutexLock lock(&mu_);
  SealActiveLocked();
}

void SegmentSet::MaybeRemoveLocked(uint64_t seq) {
  auto it = segments_.find(seq);
  if (it == segments_.end()) return;
  const Segment& s = it->second;
  if (!s.sealed || s.pending > 0 || s.usage.live_entries > 0) return;
  // Readers that still hold the file keep reading it; the name goes now (a
  // crash before the unlink is durable leaves a file Load removes).
  ::unlink(s.file->path.c_str());
  segments_.erase(it);
  ++removed_;
}

std::shared_ptr<SegmentFile> SegmentSet::Get(uint64_t seq) {
  MutexLock lock(&mu_);
  auto it = segments_.find(seq);
  return it == segments_.end() ? nullptr : it->second.file;
}

std::vector<SegmentInfo> SegmentSet::List() {
  MutexLock lock(&mu_);
  std::vector<SegmentInfo> out;
  for (const auto& [seq, s] : segments_) {
    out.push_back({seq, s.usage, s.pending, s.sealed});
  }
  return out;
}

std::vector<uint64_t> SegmentSet::CompactionCandidates(
    double max_live_fraction) {
  MutexLock lock(&mu_);
  std::vector<std::pair<double, uint64_t>> c;
  for (const auto& [seq, s] : segments_) {
    const uint64_t occupied =
        s.usage.end - std::min(s.usage.end, s.usage.punched);
    if (!s.sealed || occupied == 0 || s.usage.live_bytes >= occupied) continue;
    const double live =
        static_cast<double>(s.usage.live_bytes) / static_cast<double>(occupied);
    if (live < max_live_fraction) c.emplace_back(live, seq);
  }
  std::sort(c.begin(), c.end());
  std::vector<uint64_t> out;
  for (const auto& p : c) out.push_back(p.second);
  return out;
}

uint64_t SegmentSet::RemoveDead() {
  MutexLock lock(&mu_);
  const uint64_t before = removed_;
  std::vector<uint64_t> seqs;
  for (const auto& [seq, s] : segments_) seqs.push_back(seq);
  for (uint64_t seq : seqs) MaybeRemoveLocked(seq);
  return removed_ - before;
}

uint64_t SegmentSet::removed() const {
  MutexLock lock(&mu_);
  return removed_;
}

uint64_t SegmentSet::rolled_onto_spares() const {
  MutexLock lock(&mu_);
  return rolled_onto_spares_;
}

uint64_t SegmentSet::spares_filled() const {
  MutexLock lock(&mu_);
  return spares_filled_;
}

}  // namespace stripefs

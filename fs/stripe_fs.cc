#include "fs/stripe_fs.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "fs/posix_acl.h"
#include "fs/stripe_fs_internal.h"
#include "fuse/dirent_encoder.h"

namespace stripefs::fs {

using namespace fuse_abi;  // NOLINT
using fuse::Replier;
using Clock = std::chrono::steady_clock;
using internal::NewInodeAcl;
using internal::NewOwner;
using internal::OwnerFor;
using internal::RealNow;
using internal::SplitTimeout;

namespace {

// How long a handler waits for the kernel to take a growth push before it
// answers anyway (GrowthNotifier: the push may wait for a READ queued
// behind that handler).
constexpr std::chrono::milliseconds kGrowthStoreWait{100};

bool OpensForWriting(uint32_t open_flags) {
  return (open_flags & O_ACCMODE) != O_RDONLY;
}

// FUSE_HANDLE_KILLPRIV_V2 (raw_file_system.h): the mode without its
// privileges (0: nothing to change) ...
uint32_t KilledMode(const InodeAttr& a) {
  uint32_t killed = fuse::ModeAfterKillPriv(a.mode) & 07777;
  return killed != (a.mode & 07777) ? killed : 0;
}

// ... and the capability xattr gone (absent is fine).
Status RemoveCapability(MetaService& meta, uint64_t ino) {
  Status st = meta.RemoveXattr(ino, std::string(fuse::kCapabilityXattr));
  return st.ok() || st.code() == ENODATA ? Status::Ok() : st;
}

// Drops the privileges of `ino`, as a flagged WRITE or OPEN asks.
Status KillPriv(MetaService& meta, uint64_t ino) {
  auto a = meta.GetAttr(ino);
  if (!a.ok()) return a.status();
  if (uint32_t mode = KilledMode(*a)) {
    SetAttrRequest req;
    req.mask = kSetMode;
    req.mode = mode;
    std::vector<ObsoleteStripe> obsolete;  // a mode change frees no stripes
    auto r = meta.SetAttr(ino, req, &obsolete);
    if (!r.ok()) return r.status();
  }
  return RemoveCapability(meta, ino);
}

// Exactly `n` bytes to build a READ/READDIR reply in: the transport's
// buffer (zero-copy on io-uring), or *own resized when it has none that big.
std::span<uint8_t> ReplyBufferOr(Replier& r, uint32_t n,
                                 std::vector<uint8_t>* own) {
  std::span<uint8_t> buf = r.ReplyBuffer(n);
  if (buf.size() >= n) return buf.first(n);
  own->resize(n);
  return *own;
}

}  // namespace

StripeFsOptions ResolveSendWindows(StripeFsOptions o, uint64_t stripe_size) {
  constexpr uint64_t kMountWindowBytes = uint64_t{32} << 20;
  const uint64_t per_stripe = std::max<uint64_t>(stripe_size, 1);
  if (o.send_window == StripeFsOptions::kWindowFromStripeSize) {
    o.send_window = static_cast<size_t>(
        std::clamp<uint64_t>(kMountWindowBytes / per_stripe, 16, 64));
  }
  if (o.file_send_window == StripeFsOptions::kWindowFromStripeSize) {
    o.file_send_window = std::max<size_t>(8, o.send_window / 2);
    if (o.send_window > 0)
      o.file_send_window = std::min(o.file_send_window, o.send_window);
  }
  return o;
}

StripeFs::StripeFs(Volume* volume, StripeFsOptions options)
    : volume_(volume),
      meta_(volume->meta()),
      client_(volume->client()),
      options_(ResolveSendWindows(std::move(options),
                                  volume->client().stripe_size())),
      stripe_size_(volume->client().stripe_size()),
      budget_(options_.memory_cap),
      // Enough idle buffers for a full send window to recycle its stripes,
      // at most 32 MiB (at least 2).
      stripe_pool_(stripe_size_,
                   std::max<size_t>(
                       2, std::min<size_t>(options_.send_window + 2,
                                           (size_t{32} << 20) / stripe_size_))),
      atimes_(options_.atime),
      growth_(
          [this](uint64_t ino, uint64_t offset, std::span<const uint8_t> data) {
            fuse::Session* s = session_.load();
            if (!s) return Status(ENOTCONN, "no FUSE session attached");
            return s->NotifyStore(ino, offset, data);
          },
          kGrowthStoreWait) {
  if (options_.coalesce && options_.send_window > 0)
    sender_ = std::make_unique<StripeSender>(options_.send_window);
  purger_ = std::make_unique<OrphanPurger>(OrphanPurger::Parts{
      &meta_, &client_, &counters_.inodes_purged, &counters_.purge_errors});
  if (options_.purge_orphans_at_start) {
    auto orphans = meta_.ListOrphans();
    if (orphans.ok()) {
      for (uint64_t ino : *orphans) {
        Purge(ino);
        counters_.orphans_purged_at_mount.fetch_add(1);
      }
    } else {
      counters_.purge_errors.fetch_add(1);
    }
  }
  flusher_ = std::thread([this] { FlusherLoop(); });
}

StripeFs::~StripeFs() {
  (void)FlushAll(FlushReason::kDestroy);
  {
    std::lock_guard<std::mutex> lock(flusher_mu_);
    stop_ = true;
  }
  flusher_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

void StripeFs::FlusherLoop() {
  std::unique_lock<std::mutex> lock(flusher_mu_);
  auto atimes_written = Clock::now();
  for (;;) {
    flusher_cv_.wait_for(lock, std::chrono::milliseconds(200),
                         [&] { return stop_; });
    if (stop_) return;
    lock.unlock();
    if (!options_.atime.lazytime &&
        Clock::now() - atimes_written >= options_.atime_flush) {
      WriteAtimes();
      atimes_written = Clock::now();
    }
    std::vector<std::shared_ptr<StripeWriter>> writers;
    {
      std::lock_guard<std::mutex> nl(nodes_mu_);
      for (auto& [ino, w] : writers_) writers.push_back(w);
    }
    const auto now = Clock::now();
    const auto cutoff = now - options_.idle_flush;
    const auto frontier_cutoff = now - options_.frontier_hold;
    for (auto& w : writers) {
      // (Also a writer whose times wait only for its last commit.)
      if (w->OldestWrite() < cutoff || w->HoldsTimes())
        w->FlushIdle(cutoff, frontier_cutoff);
    }
    while (budget_.over()) {
      StripeWriter* oldest = nullptr;
      auto t = Clock::time_point::max();
      for (auto& w : writers) {
        auto o = w->OldestWrite();
        if (o < t) t = o, oldest = w.get();
      }
      if (!oldest || !oldest->FlushOldest(FlushReason::kMemoryCap)) break;
    }
    lock.lock();
  }
}

void StripeFs::StoreAtime(uint64_t ino, Timespec atime) {
  SetAttrRequest req;
  req.mask = kSetAtime | kKeepTimes;
  req.atime = atime;
  std::vector<ObsoleteStripe> none;
  auto a = meta_.SetAttr(ino, req, &none);
  // A file removed meanwhile has no atime to keep.
  if (!a.ok() && a.status().code() != ENOENT)
    counters_.CountError(a.status().code());
}

void StripeFs::WriteAtime(uint64_t ino) {
  if (auto t = atimes_.Take(ino)) StoreAtime(ino, *t);
}

void StripeFs::WriteAtimes() {
  for (const auto& [ino, t] : atimes_.TakeAll()) StoreAtime(ino, t);
}

void StripeFs::NoteAccess(uint64_t ino, bool dir, const InodeAttr* known) {
  if (!atimes_.Enabled(dir)) return;
  std::optional<InodeAttr> a;
  if (known) {
    a = *known;
  } else if (!dir) {
    a = attr_cache_.Get(ino);
  }
  if (!a) {
    auto f = dir ? meta_.GetAttr(ino) : FetchAttr(ino, Growth::kIgnore);
    if (!f.ok()) return;
    a = *f;
  }
  atimes_.Access(*a, RealNow());
}

Status StripeFs::FlushAll(FlushReason why) {
  WriteAtimes();
  std::vector<std::shared_ptr<StripeWriter>> writers;
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    for (auto& [ino, w] : writers_) writers.push_back(w);
  }
  Status first;
  for (auto& w : writers) {
    Status st = w->Flush(why);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

nlohmann::json StripeFs::StatsJson() const {
  StatsInputs in;
  in.volume = volume_->description();
  const Geometry& g = volume_->geometry();
  in.k = g.k;
  in.m = g.m;
  in.cell_size = g.cell_size;
  in.stripe_size = g.stripe_size();
  in.mountpoint = options_.mountpoint;
  in.pid = static_cast<int>(::getpid());
  in.coalesce = options_.coalesce;
  in.idle_flush_ms = static_cast<uint64_t>(options_.idle_flush.count());
  in.frontier_hold_ms = static_cast<uint64_t>(options_.frontier_hold.count());
  in.memory_cap = options_.memory_cap;
  in.send_window = options_.send_window;
  in.file_send_window = options_.file_send_window;
  in.buffered_bytes = budget_.used();
  in.live_writers = live_writers();
  in.cached_attrs = attr_cache_.size();
  in.fs = &counters_;
  in.coalesce_counters = &coalesce_counters_;
  in.client = client_.counters();
  if (const HoldingMetaService* h = volume_->holding_meta()) {
    in.has_meta_hold = true;
    in.meta_held_calls = h->held_calls();
    in.meta_expired_calls = h->expired_calls();
    in.meta_failovers = volume_->meta_failovers();
  }
  if (fuse::Session* s = session_.load()) {
    in.has_engine = true;
    in.engine = s->Stats();
  }
  return fs::StatsJson(in);
}

void StripeFs::Fail(Replier& r, int err) {
  counters_.CountError(err);
  r.Error(err);
}

Result<std::map<uint64_t, uint64_t>> StripeFs::CommittedStripes(uint64_t ino,
                                                                uint64_t first,
                                                                uint64_t last) {
  // Bounded replies: a huge file's map is read in batches.
  constexpr uint64_t kBatch = 4096;
  const uint64_t k = volume_->geometry().k;
  std::map<uint64_t, uint64_t> out;
  for (uint64_t s = first; s <= last;) {
    const uint64_t n = std::min(kBatch, last - s + 1);
    auto stripes = meta_.GetStripes(ino, s, n);
    if (!stripes.ok()) return stripes.status();
    for (const auto& sv : *stripes) out[sv.stripe] = k * sv.chunk_len;
    if (last - s < n) break;
    s += n;
  }
  return out;
}

Result<std::map<uint64_t, uint64_t>> StripeFs::DataStripes(uint64_t ino,
                                                           uint64_t first,
                                                           uint64_t last) {
  auto out = CommittedStripes(ino, first, last);
  if (!out.ok()) return out;
  if (auto w = WriterFor(ino, false)) {
    for (uint64_t s : w->BufferedStripes()) {
      if (s >= first && s <= last) (*out)[s] = stripe_size_;
    }
  }
  return out;
}

uint64_t StripeFs::StoredBytes(const InodeAttr& a) {
  if (!S_ISREG(a.mode) || a.size == 0) return 0;
  // Buffered stripes count whole: then the map is read every time. Else
  // the count kept at this change marker serves (attr_cache.h).
  const auto w = WriterFor(a.ino, false);
  const bool buffered = w && w->HasBuffered();
  if (!buffered) {
    if (auto kept = attr_cache_.StoredBytes(a)) {
      counters_.stored_bytes_kept.fetch_add(1, std::memory_order_relaxed);
      return *kept;
    }
  }
  const uint64_t last = (a.size - 1) / stripe_size_;
  auto stripes =
      buffered ? DataStripes(a.ino, 0, last) : CommittedStripes(a.ino, 0, last);
  if (!stripes.ok()) return 0;
  uint64_t bytes = 0;
  for (const auto& [s, n] : *stripes) {
    bytes += std::min(n, a.size - s * stripe_size_);
  }
  if (!buffered) attr_cache_.PutStoredBytes(a, bytes);
  return bytes;
}

fuse_attr StripeFs::ToAttr(const InodeAttr& attr) {
  InodeAttr a = attr;
  atimes_.Apply(&a);  // an access not written yet
  fuse_attr o{};
  o.ino = a.ino;
  o.size = a.size;
  o.blocks = (StoredBytes(a) + 511) / 512;
  o.atime = static_cast<uint64_t>(a.atime.sec);
  o.mtime = static_cast<uint64_t>(a.mtime.sec);
  o.ctime = static_cast<uint64_t>(a.ctime.sec);
  o.atimensec = a.atime.nsec;
  o.mtimensec = a.mtime.nsec;
  o.ctimensec = a.ctime.nsec;
  o.mode = a.mode;
  o.nlink = a.nlink;
  o.uid = a.uid;
  o.gid = a.gid;
  o.rdev = a.rdev;
  o.blksize = static_cast<uint32_t>(std::min<uint64_t>(stripe_size_, 1u << 30));
  return o;
}

fuse_entry_out StripeFs::MakeEntry(const InodeAttr& a) {
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    nodes_[a.ino].lookups++;
  }
  fuse_entry_out e{};
  e.nodeid = a.ino;
  e.generation = a.generation;
  SplitTimeout(options_.entry_timeout, &e.entry_valid, &e.entry_valid_nsec);
  SplitTimeout(options_.attr_timeout, &e.attr_valid, &e.attr_valid_nsec);
  e.attr = ToAttr(a);
  return e;
}

std::shared_ptr<StripeWriter> StripeFs::WriterFor(uint64_t ino, bool create) {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  auto it = writers_.find(ino);
  if (it != writers_.end()) return it->second;
  if (!create) return nullptr;
  StripeWriterOptions wo;
  wo.coalesce = options_.coalesce;
  wo.sender = sender_.get();
  wo.file_window = options_.file_send_window;
  wo.pool = &stripe_pool_;
  auto w = std::make_shared<StripeWriter>(ino, &client_, &meta_, &budget_,
                                          &coalesce_counters_, wo);
  writers_.emplace(ino, w);
  return w;
}

void StripeFs::DropIdleWriter(uint64_t ino) {
  std::shared_ptr<StripeWriter> w;
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    auto it = writers_.find(ino);
    if (it == writers_.end()) return;
    // Only the map holds it (nobody can take it without nodes_mu_), and
    // it has nothing buffered, in flight or committed but not yet sized:
    // dropping loses nothing.
    const StripeWriter& sw = *it->second;
    if (it->second.use_count() != 1 || sw.HasBuffered() ||
        sw.BufferedEnd() != 0 || sw.HoldsTimes())
      return;
    w = std::move(it->second);
    writers_.erase(it);
  }
  // Its commits moved size and mtime: the next read fetches them.
  attr_cache_.Forget(ino);
}

size_t StripeFs::live_writers() const {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  return writers_.size();
}

bool StripeFs::Revalidate(uint64_t token, const InodeAttr& a, Growth growth) {
  if (!S_ISREG(a.mode)) return false;
  std::optional<uint64_t> before;
  if (!attr_cache_.Update(token, a, &before)) return false;
  client_.DistrustStripeMap(a.ino);
  // Changed elsewhere (or first seen): a writer's READs re-read the size.
  if (auto w = WriterFor(a.ino, false)) w->ForgetCommittedSize();
  // The kernel holds the size last fetched, or its own from this mount's
  // writes, after which the cache forgot the entry (`before` unknown).
  const bool grew = before ? a.size > *before : growth == Growth::kShowAtOpen;
  if (growth != Growth::kIgnore && grew && a.size > 0) ShowGrowth(a);
  return true;
}

void StripeFs::ShowGrowth(const InodeAttr& a) {
  if (!writeback_cache_.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    if (writers_.count(a.ino) != 0) return;
    auto it = nodes_.find(a.ino);
    if (it != nodes_.end() && it->second.write_opens != 0) return;
  }
  // The byte at the new size - 1, as committed: the store puts it into
  // the page cache, so it must be the file's content.
  uint8_t last = 0;
  auto n = client_.Read(a.ino, a.size - 1, {&last, 1}, a.size);
  if (n.ok() && *n == 1 && growth_.Show(a.ino, a.size, last)) {
    counters_.growth_shown.fetch_add(1, std::memory_order_relaxed);
  } else {
    counters_.growth_not_shown.fetch_add(1, std::memory_order_relaxed);
  }
}

Result<InodeAttr> StripeFs::FetchAttr(uint64_t ino, Growth growth) {
  const uint64_t token = attr_cache_.BeginFetch();
  auto a = meta_.GetAttr(ino);
  if (a.ok()) Revalidate(token, *a, growth);
  return a;
}

Result<size_t> StripeFs::ReadCommitted(uint64_t ino, uint64_t offset,
                                       std::span<uint8_t> out) {
  auto cached = attr_cache_.Get(ino);
  uint64_t size = 0;
  if (cached) {
    size = cached->size;
  } else {
    auto a = FetchAttr(ino, Growth::kIgnore);
    if (!a.ok()) return a.status();
    if (!S_ISREG(a->mode)) return Status(EINVAL, "not a regular file");
    size = a->size;
  }
  return client_.Read(ino, offset, out, size);
}

void StripeFs::WithBuffered(InodeAttr* a) {
  if (!S_ISREG(a->mode)) return;
  if (auto w = WriterFor(a->ino, false)) {
    a->size = std::max(a->size, w->BufferedEnd());
    const StripeWriter::Times t = w->HeldTimes();
    if (t.mtime) a->mtime = *t.mtime;
    if (t.ctime) a->ctime = *t.ctime;
  }
}

Result<InodeAttr> StripeFs::AttrWithBuffered(uint64_t ino) {
  auto a = FetchAttr(ino);
  if (a.ok()) WithBuffered(&*a);
  return a;
}

void StripeFs::MarkOrphan(uint64_t ino) {
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    nodes_[ino].maybe_orphan = true;
  }
  MaybePurge(ino);
}

void StripeFs::MaybePurge(uint64_t ino) {
  std::shared_ptr<StripeWriter> w;
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end()) return;
    const Node& n = it->second;
    if (n.lookups != 0 || n.opens != 0 || !n.maybe_orphan) return;
    nodes_.erase(it);
    if (auto wi = writers_.find(ino); wi != writers_.end()) {
      w = std::move(wi->second);
      writers_.erase(wi);
    }
  }
  if (w) w->Discard();
  Purge(ino);
}

void StripeFs::Purge(uint64_t ino) {
  attr_cache_.Forget(ino);
  client_.ForgetStripeMap(ino);
  purger_->Enqueue(ino);
}

Result<InodeAttr> StripeFs::Resize(uint64_t ino, uint64_t new_size) {
  attr_cache_.Forget(ino);
  auto a = meta_.GetAttr(ino);
  if (!a.ok()) return a;
  if (!S_ISREG(a->mode))
    return Status(S_ISDIR(a->mode) ? EISDIR : EINVAL, "not a regular file");
  // The writer drops buffered bytes past the new size, flushes the rest.
  if (auto w = WriterFor(ino, false)) return w->Truncate(new_size);
  return client_.Truncate(ino, a->size, new_size);
}

// ---------------------------------------------------------------------------

void StripeFs::Init(const fuse::NegotiatedInit& negotiated) {
  max_write_.store(negotiated.max_write);
  dont_mask_.store(negotiated.Has(FUSE_DONT_MASK));
  writeback_cache_.store(negotiated.writeback_cache());
  // The kernel owns regular files' mtime and ctime under the writeback
  // cache: our commits must not move them (see the header).
  client_.SetKeepFileTimes(negotiated.writeback_cache());
}

void StripeFs::Destroy() {
  (void)FlushAll(FlushReason::kDestroy);
  destroyed_.store(true);
}

void StripeFs::Lookup(Replier r, uint64_t parent, std::string_view name) {
  const uint64_t token = attr_cache_.BeginFetch();
  auto a = meta_.Lookup(parent, std::string(name));
  if (!a.ok()) {
    if (a.status().code() == ENOENT) {
      counters_.negative_lookups.fetch_add(1);
      return r.Error(ENOENT);
    }
    return Fail(r, a.status());
  }
  Revalidate(token, *a);
  if (S_ISREG(a->mode)) {
    if (auto w = WriterFor(a->ino, false))
      a->size = std::max(a->size, w->BufferedEnd());
  }
  r.Entry(MakeEntry(*a));
}

void StripeFs::Forget(uint64_t nodeid, uint64_t nlookup) {
  if (nodeid == kRootInode) return;
  std::shared_ptr<StripeWriter> w;
  bool orphan = false;
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    auto it = nodes_.find(nodeid);
    if (it == nodes_.end()) return;
    Node& n = it->second;
    n.lookups -= std::min(n.lookups, nlookup);
    if (n.lookups != 0 || n.opens != 0) return;
    orphan = n.maybe_orphan;
    nodes_.erase(it);
    if (auto wi = writers_.find(nodeid); wi != writers_.end()) {
      w = std::move(wi->second);
      writers_.erase(wi);
    }
  }
  attr_cache_.Forget(nodeid);
  client_.ForgetStripeMap(nodeid);
  // Evicted: a pending atime is written now (also with lazytime).
  if (!orphan) WriteAtime(nodeid);
  atimes_.Forget(nodeid);
  if (orphan) {
    if (w) w->Discard();
    Purge(nodeid);
  } else if (w && w->HasBuffered()) {
    // Nobody can ask for an error any more: count it.
    Status st = w->Flush(FlushReason::kOther);
    if (!st.ok()) counters_.CountError(st.code());
  }
}

void StripeFs::GetAttr(Replier r, uint64_t nodeid, const fuse_getattr_in&) {
  // A directory this mount just changed: the attributes that change
  // committed, for the rest of the attribute timeout (attr_cache.h).
  std::chrono::nanoseconds age{};
  if (auto d = dir_attrs_.Take(nodeid, options_.attr_timeout, &age)) {
    counters_.dir_attrs_from_changes.fetch_add(1, std::memory_order_relaxed);
    fuse_attr_out o{};
    SplitTimeout(options_.attr_timeout - age, &o.attr_valid,
                 &o.attr_valid_nsec);
    o.attr = ToAttr(*d);
    return r.Attr(o);
  }
  auto a = AttrWithBuffered(nodeid);
  if (!a.ok()) return Fail(r, a.status());
  fuse_attr_out o{};
  SplitTimeout(options_.attr_timeout, &o.attr_valid, &o.attr_valid_nsec);
  o.attr = ToAttr(*a);
  r.Attr(o);
}

void StripeFs::SetAttr(Replier r, uint64_t nodeid, const fuse_setattr_in& in) {
  // The kernel's time flush right after an unlink, link or rename through
  // this mount (fuse_update_ctime with the writeback cache: SETATTR of
  // mtime and ctime), answered from what that change committed
  // (FoldTimeFlush). An unlinked inode's st_blocks reads 0: its chunks
  // are being purged.
  if (auto f = FoldTimeFlush(nodeid, in)) {
    (f->unlinked ? counters_.unlink_times_folded : counters_.entry_times_folded)
        .fetch_add(1, std::memory_order_relaxed);
    const uint64_t size = f->attr.size;
    if (f->unlinked) f->attr.size = 0;  // no StoredBytes lookup
    fuse_attr_out o{};
    SplitTimeout(options_.attr_timeout, &o.attr_valid, &o.attr_valid_nsec);
    o.attr = ToAttr(f->attr);
    o.attr.size = size;
    return r.Attr(o);
  }
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    if (auto it = nodes_.find(nodeid); it != nodes_.end())
      it->second.changed.reset();
  }
  attr_cache_.Forget(nodeid);
  dir_attrs_.Forget(nodeid);
  if (in.valid & (FATTR_ATIME | FATTR_ATIME_NOW)) atimes_.Forget(nodeid);
  if (in.valid & FATTR_SIZE) {
    auto a = Resize(nodeid, in.size);
    if (!a.ok()) return Fail(r, a.status());
  }
  // The kernel's times (its inode writeback, close, fsync) describe data
  // that may still be buffered here: held with it and stored right after
  // the commit that makes it durable (StripeWriter "Times"), so a client
  // that sees them move also sees the stripes. Never a commit forced by
  // times: each writeback time flush would cut a partial stripe.
  bool held = false;
  if (!(in.valid & FATTR_SIZE) &&
      (in.valid & (FATTR_MTIME | FATTR_MTIME_NOW | FATTR_CTIME)) &&
      writeback_cache_.load(std::memory_order_relaxed)) {
    if (auto w = WriterFor(nodeid, false)) {
      StripeWriter::Times t;
      if (in.valid & FATTR_MTIME_NOW) {
        t.mtime = RealNow();
      } else if (in.valid & FATTR_MTIME) {
        t.mtime = Timespec{static_cast<int64_t>(in.mtime), in.mtimensec};
      }
      if (in.valid & FATTR_CTIME)
        t.ctime = Timespec{static_cast<int64_t>(in.ctime), in.ctimensec};
      held = w->HoldTimes(t);  // false: nothing buffered, stored below
    }
  }
  SetAttrRequest req;
  if (held) req.mask |= kKeepTimes;  // the held ctime follows
  if (in.valid & FATTR_MODE) req.mask |= kSetMode, req.mode = in.mode & 07777;
  if (in.valid & FATTR_UID) req.mask |= kSetUid, req.uid = in.uid;
  if (in.valid & FATTR_GID) req.mask |= kSetGid, req.gid = in.gid;
  if (in.valid & FATTR_ATIME_NOW) {
    req.mask |= kSetAtimeNow;
  } else if (in.valid & FATTR_ATIME) {
    req.mask |= kSetAtime;
    req.atime = {static_cast<int64_t>(in.atime), in.atimensec};
  }
  if (held) {
    // mtime and ctime are the writer's now.
  } else if (in.valid & FATTR_MTIME_NOW) {
    req.mask |= kSetMtimeNow;
  } else if (in.valid & FATTR_MTIME) {
    req.mask |= kSetMtime;
    req.mtime = {static_cast<int64_t>(in.mtime), in.mtimensec};
  }
  if ((in.valid & FATTR_CTIME) && !held) {
    req.mask |= kSetCtime;
    req.ctime = {static_cast<int64_t>(in.ctime), in.ctimensec};
  }
  if ((in.valid & FATTR_KILL_SUIDGID) && !(req.mask & kSetMode)) {
    // Truncate or chown: the kill rides on the same metadata update.
    auto cur = meta_.GetAttr(nodeid);
    if (!cur.ok()) return Fail(r, cur.status());
    if (uint32_t mode = KilledMode(*cur)) req.mask |= kSetMode, req.mode = mode;
    Status st = RemoveCapability(meta_, nodeid);
    if (!st.ok()) return Fail(r, st);
  }
  // The attributes to answer: SetAttr returns them after the change, so no
  // GetAttr is needed (the kernel's ctime flush after every UNLINK of a
  // file comes here), except after a chmod, whose ACL update moves ctime.
  std::optional<InodeAttr> after;
  if ((req.mask & ~kKeepTimes) != 0) {
    const uint64_t token = attr_cache_.BeginFetch();
    std::vector<ObsoleteStripe> obsolete;
    auto set = meta_.SetAttr(nodeid, req, &obsolete);
    if (!set.ok()) return Fail(r, set.status());
    if (!obsolete.empty()) client_.DeleteStripes(obsolete);
    if (req.mask & kSetMode) {
      Status st = ChmodAcl(meta_, nodeid, req.mode);
      if (!st.ok()) return Fail(r, st);
    } else {
      Revalidate(token, *set);
      after = *set;
      WithBuffered(&*after);
    }
  }
  Result<InodeAttr> a =
      after ? Result<InodeAttr>(*after) : AttrWithBuffered(nodeid);
  if (!a.ok()) return Fail(r, a.status());
  fuse_attr_out o{};
  SplitTimeout(options_.attr_timeout, &o.attr_valid, &o.attr_valid_nsec);
  o.attr = ToAttr(*a);
  r.Attr(o);
}

void StripeFs::ReadLink(Replier r, uint64_t nodeid) {
  auto t = meta_.ReadLink(nodeid);
  if (!t.ok()) return Fail(r, t.status());
  r.Data(std::string_view(*t));
}

void StripeFs::Open(Replier r, uint64_t nodeid, const fuse_open_in& in) {
  if (in.open_flags & FUSE_OPEN_KILL_SUIDGID) {
    Status st = KillPriv(meta_, nodeid);
    if (!st.ok()) return Fail(r, st);
  }
  // Close-to-open: revalidate against metadata; a file changed elsewhere
  // also loses the kernel's cached attributes (its pages are dropped
  // because the reply has no FOPEN_KEEP_CACHE).
  const uint64_t token = attr_cache_.BeginFetch();
  auto a = meta_.GetAttr(nodeid);
  if (!a.ok()) return Fail(r, a.status());
  if (Revalidate(token, *a, Growth::kShowAtOpen)) {
    if (fuse::Session* s = session_.load())
      (void)s->NotifyInvalInode(nodeid, -1, 0);  // best effort
  }
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    Node& n = nodes_[nodeid];
    n.opens++;
    if (OpensForWriting(in.flags)) n.write_opens++;
  }
  fuse_open_out o{};
  o.fh = next_fh_.fetch_add(1);
  r.Open(o);
}

void StripeFs::Create(Replier r, uint64_t parent, std::string_view name,
                      const fuse_create_in& in) {
  auto a = NewEntry(r, parent, name, S_IFREG | (in.mode & 07777), 0, in.umask);
  if (!a.ok()) return Fail(r, a.status());
  fuse_entry_out e = MakeEntry(*a);
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    Node& n = nodes_[a->ino];
    n.opens++;
    if (OpensForWriting(in.flags)) n.write_opens++;
  }
  fuse_open_out op{};
  op.fh = next_fh_.fetch_add(1);
  r.Create(e, op);
}

void StripeFs::TmpFile(Replier r, uint64_t parent, const fuse_create_in& in) {
  NewOwner o = OwnerFor(meta_, parent, r, S_IFREG | (in.mode & 07777));
  auto acl = NewInodeAcl(meta_, parent, &o, in.umask, dont_mask_.load());
  if (!acl.ok()) return Fail(r, acl.status());
  auto a = meta_.MkNode(parent, "", o.mode, o.uid, o.gid, 0);  // anonymous
  if (!a.ok()) return Fail(r, a.status());
  // On failure the inode is an orphan already: the next start purges it.
  Status st = StoreInheritedAcl(meta_, a->ino, *acl);
  if (!st.ok()) return Fail(r, st);
  fuse_entry_out e = MakeEntry(*a);
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    Node& n = nodes_[a->ino];
    n.opens++;
    if (OpensForWriting(in.flags)) n.write_opens++;
    n.maybe_orphan = true;  // purged at the last close unless linked
  }
  WriterFor(a->ino, true);
  fuse_open_out op{};
  op.fh = next_fh_.fetch_add(1);
  r.Create(e, op);
}

void StripeFs::Read(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  // A given-back READ (below) was counted when it was tried.
  if (!r.ctx().retried)
    counters_.read_requests.fetch_add(1, std::memory_order_relaxed);
  auto w = WriterFor(nodeid, false);
  std::vector<uint8_t> own;
  std::span<uint8_t> buf = ReplyBufferOr(r, in.size, &own);
  if (r.ctx().must_not_block) {
    // On an io-uring queue thread: served from memory (cached size, cached
    // map, stripe cache, page cache of in-process chunk stores), or given
    // back to a worker thread, which reads as below. A file with a writer
    // (buffered bytes, flushes) always goes to the worker.
    auto cached = w ? std::nullopt : attr_cache_.Get(nodeid);
    auto n = cached ? client_.TryRead(nodeid, in.offset, buf, cached->size)
                    : Result<size_t>(Status::WouldBlock("not cached"));
    if (!n.ok()) return r.WouldBlock();
    counters_.read_bytes.fetch_add(*n, std::memory_order_relaxed);
    NoteAccess(nodeid, false, &*cached);  // no metadata call
    return r.Data(std::span<const uint8_t>(buf.data(), *n));
  }
  auto n = w ? w->Read(in.offset, buf) : ReadCommitted(nodeid, in.offset, buf);
  if (!n.ok()) return Fail(r, n.status());
  counters_.read_bytes.fetch_add(*n, std::memory_order_relaxed);
  if (!w) {
    NoteAccess(nodeid, false);  // ReadCommitted cached the attributes
  } else if (auto c = attr_cache_.Get(nodeid)) {
    // A file being written: no attribute fetch per READ just for atime.
    NoteAccess(nodeid, false, &*c);
  }
  r.Data(std::span<const uint8_t>(buf.data(), *n));
}

void StripeFs::Write(Replier r, uint64_t nodeid, const fuse::WriteRequest& w) {
  counters_.CountWrite(w.offset(), w.size(), stripe_size_, max_write_.load(),
                       w.is_writeback());
  if (w.kill_suidgid()) {  // before the data, as the VFS orders it
    Status st = KillPriv(meta_, nodeid);
    if (!st.ok()) return Fail(r, st);
  }
  auto writer = WriterFor(nodeid, true);
  // A whole stripe may be sent from the request buffer itself (kept past
  // the reply; /dev/fuse only, see StripeWriter's Pipelining).
  Status st =
      writer->Write(w.offset(), w.data, [&r] { return r.KeepRequestBuffer(); });
  if (!st.ok()) return Fail(r, st);
  r.Written(w.size());
}

// The volume's own space: for each file system holding chunk stores
// (counted once however many stores share it: same host and fs id), its
// size and free space less the stores' reserve; times k/(k+m), the data
// share of every stripe. Servers that are not up, or do not answer, count
// nothing.
void StripeFs::StatFs(Replier r, uint64_t) {
  const Geometry& g = volume_->geometry();
  fuse_kstatfs st{};
  st.bsize = 4096;
  st.frsize = 4096;
  st.namelen = 255;
  uint64_t raw_total = 0, raw_free = 0;
  std::set<std::pair<std::string, uint64_t>> seen;  // (host, fs id)
  auto map = meta_.GetClusterMap();
  if (map.ok()) {
    for (const auto& s : map->servers) {
      if (s.state != ServerState::kUp) continue;
      ChunkService* svc = volume_->servers().Get(s);
      if (!svc) continue;
      auto cs = svc->Stats();
      if (!cs.ok()) continue;
      const std::string host = s.address.substr(0, s.address.rfind(':'));
      if (!seen.emplace(host, cs->fs_id).second) continue;
      const uint64_t reserve = std::min(cs->bytes_reserved, cs->bytes_capacity);
      raw_total += cs->bytes_capacity - reserve;
      raw_free += cs->bytes_free > reserve ? cs->bytes_free - reserve : 0;
    }
  }
  auto fsst = meta_.StatFs();
  const uint64_t data_free = raw_free / (g.k + g.m) * g.k;
  const uint64_t data_total =
      std::max(raw_total / (g.k + g.m) * g.k, data_free);
  st.blocks = data_total / st.frsize;
  st.bfree = data_free / st.frsize;
  st.bavail = st.bfree;
  st.files = (fsst.ok() ? fsst->inodes : 0) + (uint64_t{1} << 32);
  st.ffree = uint64_t{1} << 32;
  r.Statfs(st);
}

void StripeFs::Release(Replier r, uint64_t nodeid, const fuse_release_in& in) {
  bool last_close = false;
  if (auto w = WriterFor(nodeid, false)) {
    Status st = w->Flush(FlushReason::kRelease);
    if (!st.ok()) counters_.CountError(st.code());  // nobody to tell
  }
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    auto it = nodes_.find(nodeid);
    if (it != nodes_.end() && it->second.opens > 0) {
      it->second.opens--;
      if (OpensForWriting(in.flags) && it->second.write_opens > 0)
        it->second.write_opens--;
    }
    last_close = it == nodes_.end() || it->second.opens == 0;
  }
  if (last_close) {
    DropIdleWriter(nodeid);
    if (!options_.atime.lazytime) WriteAtime(nodeid);
  }
  MaybePurge(nodeid);
  r.Ok();
}

void StripeFs::Fsync(Replier r, uint64_t nodeid, const fuse_fsync_in&) {
  if (auto w = WriterFor(nodeid, false)) {
    Status st = w->Flush(FlushReason::kFsync);
    if (!st.ok()) return Fail(r, st);
  }
  WriteAtime(nodeid);
  // The file's own namespace changes (its create, a rename) too: a metad
  // may acknowledge them before its WAL sync.
  if (Status st = meta_.Sync(); !st.ok()) return Fail(r, st);
  r.Ok();
}

void StripeFs::Flush(Replier r, uint64_t nodeid, const fuse_flush_in&) {
  if (auto w = WriterFor(nodeid, false)) {
    Status st = w->Flush(FlushReason::kFlush);
    if (!st.ok()) return Fail(r, st);
  }
  r.Ok();
}

void StripeFs::SetXattr(Replier r, uint64_t nodeid, std::string_view name,
                        std::span<const uint8_t> value,
                        const fuse_setxattr_in& in) {
  dir_attrs_.Forget(nodeid);  // ctime (and an ACL's mode) move
  Status st;
  if (name == kAclAccessXattr) {
    st = SetAccessAcl(meta_, nodeid, value, in.flags, in.setxattr_flags);
  } else if (name == kAclDefaultXattr) {
    st = SetDefaultAcl(meta_, nodeid, value, in.flags);
  } else {
    st = meta_.SetXattr(
        nodeid, std::string(name),
        std::string(reinterpret_cast<const char*>(value.data()), value.size()),
        in.flags);
  }
  if (!st.ok()) return Fail(r, st);
  r.Ok();
}

void StripeFs::GetXattr(Replier r, uint64_t nodeid, std::string_view name,
                        uint32_t size) {
  auto v = meta_.GetXattr(nodeid, std::string(name));
  if (!v.ok()) {
    if (v.status().code() == ENODATA) return r.Error(ENODATA);  // normal
    return Fail(r, v.status());
  }
  if (size == 0) return r.XattrSize(static_cast<uint32_t>(v->size()));
  if (v->size() > size) return Fail(r, ERANGE);
  r.Data(std::string_view(*v));
}

void StripeFs::ListXattr(Replier r, uint64_t nodeid, uint32_t size) {
  auto names = meta_.ListXattr(nodeid);
  if (!names.ok()) return Fail(r, names.status());
  std::string list;
  for (const auto& n : *names) {
    list += n;
    list.push_back('\0');
  }
  if (size == 0) return r.XattrSize(static_cast<uint32_t>(list.size()));
  if (list.size() > size) return Fail(r, ERANGE);
  r.Data(std::string_view(list));
}

void StripeFs::RemoveXattr(Replier r, uint64_t nodeid, std::string_view name) {
  dir_attrs_.Forget(nodeid);
  Status st = meta_.RemoveXattr(nodeid, std::string(name));
  if (!st.ok()) {
    if (st.code() == ENODATA) return r.Error(ENODATA);
    return Fail(r, st);
  }
  r.Ok();
}

void StripeFs::OpenDir(Replier r, uint64_t nodeid, const fuse_open_in&) {
  auto a = meta_.GetAttr(nodeid);
  if (!a.ok()) return Fail(r, a.status());
  if (!S_ISDIR(a->mode)) return Fail(r, ENOTDIR);
  fuse_open_out o{};
  r.Open(o);  // readdir is stateless: cookies come from the metadata
}

void StripeFs::ReplyReadDir(Replier& r, uint64_t ino, const fuse_read_in& in,
                            bool plus) {
  const uint32_t min_entry =
      plus ? sizeof(fuse_direntplus) + 8 : sizeof(fuse_dirent) + 8;
  const uint32_t max_entries = std::max<uint32_t>(1, in.size / min_entry + 1);
  auto entries = meta_.ReadDir(ino, in.offset, max_entries);
  if (!entries.ok()) return Fail(r, entries.status());
  if (in.offset == 0) NoteAccess(ino, /*dir=*/true);  // once per listing
  std::vector<uint8_t> own;
  std::span<uint8_t> buf = ReplyBufferOr(r, in.size, &own);
  if (!plus) {
    fuse::DirentEncoder enc(buf);
    for (const auto& e : *entries) {
      if (!enc.Add(e.ino, e.name, (e.mode & S_IFMT) >> 12, e.cookie)) break;
    }
    return r.Data(enc.bytes());
  }
  fuse::DirentPlusEncoder enc(buf);
  for (const auto& e : *entries) {
    fuse_entry_out out{};
    bool counted = false;
    if (e.name != "." && e.name != "..") {
      auto a = AttrWithBuffered(e.ino);
      if (a.ok()) {
        out.nodeid = a->ino;
        out.generation = a->generation;
        SplitTimeout(options_.entry_timeout, &out.entry_valid,
                     &out.entry_valid_nsec);
        SplitTimeout(options_.attr_timeout, &out.attr_valid,
                     &out.attr_valid_nsec);
        out.attr = ToAttr(*a);
        counted = true;
      }
    }
    if (!counted) {
      out.attr.ino = e.ino;
      out.attr.mode = e.mode;
    }
    if (!enc.Add(out, e.name, (e.mode & S_IFMT) >> 12, e.cookie)) break;
    if (counted) {
      std::lock_guard<std::mutex> lock(nodes_mu_);
      nodes_[e.ino].lookups++;
    }
  }
  r.Data(enc.bytes());
}

void StripeFs::ReadDir(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  ReplyReadDir(r, nodeid, in, false);
}

void StripeFs::ReadDirPlus(Replier r, uint64_t nodeid, const fuse_read_in& in) {
  ReplyReadDir(r, nodeid, in, true);
}

void StripeFs::ReleaseDir(Replier r, uint64_t, const fuse_release_in&) {
  r.Ok();
}

void StripeFs::FsyncDir(Replier r, uint64_t nodeid, const fuse_fsync_in&) {
  WriteAtime(nodeid);
  // Directory changes may be acknowledged before metad's WAL sync.
  if (Status st = meta_.Sync(); !st.ok()) return Fail(r, st);
  r.Ok();
}

void StripeFs::Access(Replier r, uint64_t nodeid, uint32_t mask) {
  auto a = meta_.GetAttr(nodeid);
  if (!a.ok()) return Fail(r, a.status());
  const uint32_t uid = r.ctx().uid, gid = r.ctx().gid;
  uint32_t want = mask & 7;      // R_OK 4, W_OK 2, X_OK 1
  if (want == 0) return r.Ok();  // F_OK
  if (uid == 0) {
    // root: everything but execute without any x bit.
    if ((want & X_OK) && !S_ISDIR(a->mode) && !(a->mode & 0111))
      return Fail(r, EACCES);
    return r.Ok();
  }
  uint32_t bits = a->uid == uid   ? (a->mode >> 6) & 7
                  : a->gid == gid ? (a->mode >> 3) & 7
                                  : a->mode & 7;
  if ((bits & want) != want) return Fail(r, EACCES);
  r.Ok();
}

void StripeFs::Interrupt(uint64_t) {
  // Every operation here completes promptly on its own; an interrupted
  // request is simply answered normally (the kernel discards the answer).
}

void StripeFs::Fallocate(Replier r, uint64_t nodeid,
                         const fuse_fallocate_in& in) {
  const uint32_t supported =
      FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
  if (in.mode & ~supported) return Fail(r, EOPNOTSUPP);
  if ((in.mode & FALLOC_FL_PUNCH_HOLE) && !(in.mode & FALLOC_FL_KEEP_SIZE)) {
    return Fail(r, EOPNOTSUPP);
  }
  attr_cache_.Forget(nodeid);
  auto a = AttrWithBuffered(nodeid);
  if (!a.ok()) return Fail(r, a.status());
  if (!S_ISREG(a->mode)) return Fail(r, S_ISDIR(a->mode) ? EISDIR : ENODEV);
  const uint64_t end = in.offset + in.length;
  if (in.mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
    const uint64_t zero_end = std::min(end, a->size);
    uint64_t zeros_to = zero_end;
    if ((in.mode & FALLOC_FL_PUNCH_HOLE) && in.offset < zero_end) {
      auto head = PunchWholeStripes(nodeid, in.offset, zero_end, a->size);
      if (!head.ok()) return Fail(r, head.status());
      zeros_to = *head;
    }
    // The rest is written as zeros (the backend has no holes inside a
    // stripe; ZERO_RANGE keeps the stripes allocated).
    Status st = WriteZeros(nodeid, in.offset, zeros_to);
    if (!st.ok()) return Fail(r, st);
  }
  if (!(in.mode & FALLOC_FL_KEEP_SIZE) && end > a->size) {
    auto g = Resize(nodeid, end);
    if (!g.ok()) return Fail(r, g.status());
  }
  r.Ok();
}

Status StripeFs::WriteZeros(uint64_t ino, uint64_t from, uint64_t to) {
  if (from >= to) return Status::Ok();
  static const std::vector<uint8_t> kZeros(1u << 20, 0);
  auto w = WriterFor(ino, true);
  for (uint64_t pos = from; pos < to;) {
    const uint64_t n = std::min<uint64_t>(kZeros.size(), to - pos);
    Status st = w->Write(pos, std::span<const uint8_t>(kZeros.data(), n));
    if (!st.ok()) return st;
    pos += n;
  }
  return Status::Ok();
}

Result<uint64_t> StripeFs::PunchWholeStripes(uint64_t ino, uint64_t from,
                                             uint64_t to, uint64_t size) {
  const uint64_t S = stripe_size_;
  const uint64_t first = (from + S - 1) / S;
  // A punch reaching EOF takes the last stripe too: past EOF is zeros.
  const uint64_t last_end = to == size ? (to + S - 1) / S : to / S;
  if (first >= last_end) return to;  // no whole stripe inside
  // Buffered bytes of the punched stripes commit first, then go with them.
  if (auto w = WriterFor(ino, false)) {
    STRIPEFS_RETURN_IF_ERROR(w->Flush(FlushReason::kTruncate));
  }
  std::vector<ObsoleteStripe> obsolete;
  // Under the writeback cache the kernel keeps its times for a punch
  // (fuse_file_fallocate): metadata keeps them too.
  Status st =
      client_.keep_file_times()
          ? meta_.DropStripesKeepTimes(ino, first, last_end - first, &obsolete)
          : Status::NotSupported("stamping");
  if (st.code() == EOPNOTSUPP) {
    obsolete.clear();
    st = meta_.DropStripes(ino, first, last_end - first, &obsolete);
  }
  if (st.code() == EOPNOTSUPP) return to;  // zeros everywhere instead
  STRIPEFS_RETURN_IF_ERROR(st);
  if (!obsolete.empty()) client_.DeleteStripes(obsolete);
  // Zeros are still due in [from, first * S) and [last_end * S, to).
  if (to > last_end * S) {
    STRIPEFS_RETURN_IF_ERROR(WriteZeros(ino, last_end * S, to));
  }
  return std::min(to, first * S);
}

void StripeFs::Lseek(Replier r, uint64_t nodeid, const fuse_lseek_in& in) {
  if (in.whence != SEEK_DATA && in.whence != SEEK_HOLE) return Fail(r, EINVAL);
  auto a = AttrWithBuffered(nodeid);
  if (!a.ok()) return Fail(r, a.status());
  const uint64_t size = a->size, off = in.offset;
  if (off >= size) return r.Error(ENXIO);
  const uint64_t S = stripe_size_;
  const uint64_t first = off / S, last = (size - 1) / S;
  auto data = DataStripes(nodeid, first, last);  // what st_blocks counts
  if (!data.ok()) return Fail(r, data.status());
  if (in.whence == SEEK_DATA) {
    if (data->empty()) return r.Error(ENXIO);
    return r.Lseek(std::max(off, data->begin()->first * S));
  }
  for (uint64_t s = first; s <= last; ++s) {
    if (!data->count(s)) return r.Lseek(std::max(off, s * S));
  }
  r.Lseek(size);
}

void StripeFs::SyncFs(Replier r, uint64_t) {
  Status st = FlushAll(FlushReason::kFsync);
  if (st.ok()) st = meta_.Sync();
  if (!st.ok()) return Fail(r, st);
  r.Ok();
}

}  // namespace stripefs::fs

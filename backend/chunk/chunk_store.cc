#include "backend/chunk/chunk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/iterator.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <random>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/uring_file_io.h"
#include "common/unique_fd.h"
#include "ec/crc32c.h"

namespace stripefs {
namespace {

constexpr char kMarkerName[] = "CHUNKSTORE";
constexpr char kMarkerContent[] = "stripefs chunk store 1\n";
constexpr char kLockName[] = "chunkstore.lock";
constexpr char kIndexName[] = "index";
constexpr char kDataName[] = "data";
constexpr char kTmpName[] = "tmp";
// Stripes per second-level data directory: data/<inode>/<stripe >> 12>/.
constexpr unsigned kStripeBucketShift = 12;

void Log(const std::string& dir, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
void Log(const std::string& dir, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "stripefs chunk store %s: %s\n", dir.c_str(), buf);
}

bool IsNoSpace(int err) { return err == ENOSPC || err == EDQUOT; }

Status FsyncDir(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "open directory " + path);
  if (::fsync(fd.get()) != 0) {
    return Status::FromErrno(errno, "fsync directory " + path);
  }
  return Status::Ok();
}

// Names in a directory except "." and "..".
Result<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return Status::FromErrno(errno, "open directory " + path);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  return names;
}

bool ParseHex64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

bool ParseDec32(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

// "<stripe %016x>.<index>.<version %016x>" -> parts.
bool ParseChunkFileName(std::string_view name, uint64_t* stripe,
                        uint32_t* index, uint64_t* version) {
  size_t a = name.find('.');
  if (a == std::string_view::npos) return false;
  size_t b = name.find('.', a + 1);
  if (b == std::string_view::npos) return false;
  return name.size() - b - 1 == 16 && a == 16 &&
         ParseHex64(name.substr(0, a), stripe) &&
         ParseDec32(name.substr(a + 1, b - a - 1), index) &&
         ParseHex64(name.substr(b + 1), version);
}

std::string Hex16(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}
std::string HexShort(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%" PRIx64, v);
  return buf;
}

std::string RocksMessage(const rocksdb::Status& s) { return s.ToString(); }

// RocksDB's info log goes to stderr (warnings and worse), never to a file in
// the store: a LOG file on a full disk fails, and RocksDB 7.8 (built with
// assertions in Debian) aborts when it later logs through the failed writer.
class StderrRocksLogger : public rocksdb::Logger {
 public:
  explicit StderrRocksLogger(std::string dir)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL),
        dir_(std::move(dir)) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    std::fprintf(stderr, "stripefs chunk store %s: rocksdb: %s\n", dir_.c_str(),
                 buf);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    Logv(format, ap);
  }

 private:
  std::string dir_;
};

// Turns off RocksDB's automatic recovery from background errors. For a
// full disk it waits for write_buffer_size of free space and meanwhile makes
// manual Resume() fail with Busy; the store resumes by itself (IndexWrite)
// right after it freed space or when the next write comes.
class NoAutoRecovery : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/,
                            rocksdb::Status /*bg_error*/,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }
};

}  // namespace

ChunkStore::ChunkStore(std::string dir, const ChunkStoreOptions& options)
    : dir_(std::move(dir)),
      data_dir_(dir_ + "/" + kDataName),
      tmp_dir_(dir_ + "/" + kTmpName),
      options_(options) {
  std::random_device rd;
  uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  tmp_prefix_ = std::to_string(::getpid()) + "-" + Hex16(r) + ".";
}

ChunkStore::~ChunkStore() {
  if (db_) {
    (void)db_->Close();
    db_.reset();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

bool ChunkStore::using_io_uring() const { return io_->using_io_uring(); }

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(
    const std::string& dir_in, const ChunkStoreOptions& options) {
  if (dir_in.empty()) {
    return Status::InvalidArgument("chunk store directory is empty");
  }
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();

  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::FromErrno(errno, "stat " + dir);
    if (!options.create_if_missing) {
      return Status::NotFound("chunk store directory " + dir +
                              " does not exist; check the path");
    }
    // mkdir -p
    for (size_t pos = 1; pos <= dir.size(); ++pos) {
      if (pos == dir.size() || dir[pos] == '/') {
        std::string part = dir.substr(0, pos);
        if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
          return Status::FromErrno(errno,
                                   "cannot create chunk store "
                                   "directory " +
                                       part);
        }
      }
    }
    if (::stat(dir.c_str(), &st) != 0) {
      return Status::FromErrno(errno, "stat " + dir);
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(ENOTDIR, "chunk store path " + dir +
                               " exists but is not a directory; pass a "
                               "directory (it is created when missing)");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    int err = errno;
    return Status(err == EROFS ? EROFS : EACCES,
                  "chunk store directory " + dir + " is not writable (" +
                      std::strerror(err) +
                      "); fix its permissions or pick another directory");
  }

  // Refuse a non-empty directory that is not (or not yet) a chunk store.
  std::string marker = dir + "/" + kMarkerName;
  bool has_marker = ::access(marker.c_str(), F_OK) == 0;
  if (has_marker) {
    UniqueFd mfd(::open(marker.c_str(), O_RDONLY | O_CLOEXEC));
    char buf[64] = {};
    ssize_t n = mfd.valid() ? ::read(mfd.get(), buf, sizeof(buf) - 1) : -1;
    if (n < 0 || std::string_view(buf, static_cast<size_t>(n)) !=
                     std::string_view(kMarkerContent)) {
      return Status::Corruption("chunk store marker " + marker +
                                " is unreadable or of an unknown format; "
                                "this build reads 'stripefs chunk store 1'");
    }
    // The index is the source of truth: opening a store whose index is gone
    // would make every chunk file an orphan and Sweep would delete them all.
    std::string current = dir + "/" + kIndexName + "/CURRENT";
    if (::access(current.c_str(), F_OK) != 0) {
      return Status::Corruption(
          "chunk store " + dir + " has lost its index (" + current +
          " is missing); refusing to open, since every chunk file would "
          "count as an orphan. Restore " +
          dir + "/" + kIndexName + ", or move " + dir +
          " away and let repair rebuild this server");
    }
  } else {
    STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
    for (const auto& n : names) {
      if (n != kLockName && n != kIndexName && n != kDataName &&
          n != kTmpName && n != std::string(kMarkerName) + ".tmp") {
        return Status(ENOTEMPTY,
                      "directory " + dir +
                          " is not empty and is not a chunk store (found '" +
                          n + "'); pass an empty or new directory");
      }
    }
    if (!options.create_if_missing) {
      return Status::NotFound(dir + " is not a chunk store (no " + kMarkerName +
                              " marker); check the path");
    }
  }

  std::unique_ptr<ChunkStore> store(new ChunkStore(dir, options));

  // Lock file: one ChunkStore per directory (flock is per open file, so a
  // second Open in the same process is refused too).
  std::string lock_path = dir + "/" + kLockName;
  store->lock_fd_ =
      ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (store->lock_fd_ < 0) {
    return Status::FromErrno(errno, "cannot create lock file " + lock_path);
  }
  if (::flock(store->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      char buf[32] = {};
      ssize_t n = ::pread(store->lock_fd_, buf, sizeof(buf) - 1, 0);
      std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n))
                                 : std::string("unknown");
      while (!holder.empty() && holder.back() == '\n') holder.pop_back();
      return Status(EBUSY, "chunk store " + dir + " is already open (lock " +
                               lock_path + " held by pid " + holder +
                               "); stop that chunkd or use another directory");
    }
    return Status::FromErrno(err, "flock " + lock_path);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(store->lock_fd_, 0) != 0 ||
      ::pwrite(store->lock_fd_, pid.data(), pid.size(), 0) !=
          static_cast<ssize_t>(pid.size())) {
    return Status::FromErrno(errno, "cannot write lock file " + lock_path);
  }

  for (const std::string& sub :
       {store->data_dir_, store->tmp_dir_, dir + "/" + kIndexName}) {
    if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "cannot create " + sub);
    }
  }
  STRIPEFS_RETURN_IF_ERROR(FsyncDir(dir));
  store->durable_dirs_.insert(store->data_dir_);

  STRIPEFS_RETURN_IF_ERROR(store->OpenIndex());

  if (!has_marker) {
    std::string tmp = marker + ".tmp";
    UniqueFd mfd(
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    size_t len = sizeof(kMarkerContent) - 1;
    if (!mfd.valid() ||
        ::write(mfd.get(), kMarkerContent, len) != static_cast<ssize_t>(len) ||
        ::fsync(mfd.get()) != 0 || ::rename(tmp.c_str(), marker.c_str()) != 0) {
      return Status::FromErrno(errno, "cannot write marker " + marker);
    }
    STRIPEFS_RETURN_IF_ERROR(FsyncDir(dir));
  }

  store->reserve_bytes_ = options.reserve_bytes;
  if (options.reserve_bytes == kScaledReserve) {
    struct statvfs vfs;
    if (::statvfs(dir.c_str(), &vfs) != 0)
      return Status::FromErrno(errno, "statvfs " + dir);
    store->reserve_bytes_ =
        ScaledChunkReserve(static_cast<uint64_t>(vfs.f_blocks) *
                           static_cast<uint64_t>(vfs.f_frsize));
  }
  store->io_ = std::make_unique<UringFileIo>(options.use_io_uring, dir);

  if (options.sweep_on_open) {
    auto rep = store->Sweep();
    if (!rep.ok()) return rep.status().Annotate("sweep of " + dir);
    const SweepReport& r = *rep;
    if (r.temp_files_removed || r.orphans_removed || r.missing_dropped ||
        r.unknown_files) {
      Log(dir,
          "open: removed %" PRIu64 " temp files and %" PRIu64
          " orphan chunk files, dropped %" PRIu64
          " index entries whose file is missing, left %" PRIu64
          " unknown files in data/",
          r.temp_files_removed, r.orphans_removed, r.missing_dropped,
          r.unknown_files);
    }
  }
  STRIPEFS_RETURN_IF_ERROR(store->RecountFromIndex());
  return store;
}

Status ChunkStore::OpenIndex() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.paranoid_checks = true;
  // Small stores on small file systems: no large preallocations.
  o.manifest_preallocation_size = 64 << 10;
  o.allow_fallocate = false;
  o.keep_log_file_num = 4;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o.info_log = std::make_shared<StderrRocksLogger>(dir_);
  o.listeners.push_back(std::make_shared<NoAutoRecovery>());
  // The index is small: entries are ~50 bytes.
  o.write_buffer_size = 8 << 20;
  rocksdb::DB* raw = nullptr;
  std::string path = dir_ + "/" + kIndexName;
  rocksdb::Status s = rocksdb::DB::Open(o, path, &raw);
  if (!s.ok()) {
    if (s.IsIOError() && s.ToString().find("No space") != std::string::npos) {
      return Status::NoSpace("cannot open chunk index " + path + ": " +
                             RocksMessage(s) + "; free space on " + dir_);
    }
    return Status::Corruption("cannot open chunk index " + path + ": " +
                              RocksMessage(s));
  }
  db_.reset(raw);
  return Status::Ok();
}

Status ChunkStore::RecountFromIndex() {
  uint64_t chunks = 0, bytes = 0, malformed = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
  std::string start(1, kChunkKeyPrefix);
  for (it->Seek(start); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() == 0 || k[0] != kChunkKeyPrefix) break;
    ChunkId id;
    uint64_t version;
    auto v = DecodeChunkValue(
        std::string_view(it->value().data(), it->value().size()));
    if (!DecodeChunkKey(std::string_view(k.data(), k.size()), &id, &version)
             .ok() ||
        !v.ok()) {
      ++malformed;
      continue;
    }
    ++chunks;
    bytes += v->length;
  }
  if (!it->status().ok()) {
    return Status::Corruption("cannot scan chunk index of " + dir_ + ": " +
                              RocksMessage(it->status()));
  }
  if (malformed > 0) {
    Log(dir_,
        "%" PRIu64
        " malformed index entries (ignored; reads of them return "
        "EBADMSG)",
        malformed);
  }
  chunks_ = chunks;
  bytes_ = bytes;
  malformed_ += malformed;
  return Status::Ok();
}

std::shared_mutex& ChunkStore::LockFor(const ChunkId& id) {
  uint64_t h = id.inode * 0x9E3779B97F4A7C15ull;
  h ^= id.stripe * 0xC2B2AE3D27D4EB4Full;
  h ^= (static_cast<uint64_t>(id.index) + 1) * 0x165667B19E3779F9ull;
  h ^= h >> 31;
  return chunk_locks_[h % kLockStripes];
}

std::string ChunkStore::DataPath(const ChunkId& id, uint64_t version) const {
  return data_dir_ + "/" + Hex16(id.inode) + "/" +
         HexShort(id.stripe >> kStripeBucketShift) + "/" + Hex16(id.stripe) +
         "." + std::to_string(id.index) + "." + Hex16(version);
}

uint64_t ScaledChunkReserve(uint64_t capacity_bytes) {
  return kChunkReserveFloorBytes + capacity_bytes / 100 * kChunkReservePercent;
}

Status ChunkStore::NoSpaceStatus(const std::string& what) {
  nospace_.fetch_add(1, std::memory_order_relaxed);
  struct statvfs vfs;
  std::string avail = "unknown";
  if (::statvfs(dir_.c_str(), &vfs) == 0) {
    avail = std::to_string(static_cast<uint64_t>(vfs.f_bavail) *
                           static_cast<uint64_t>(vfs.f_frsize));
  }
  return Status::NoSpace(
      "chunk store " + dir_ + " is full (" + avail + " bytes available, " +
      std::to_string(reserve_bytes_) + " reserved) while " + what +
      "; free space on that file system, add capacity, or mark this chunk "
      "server out so repair places its chunks elsewhere");
}

Status ChunkStore::CheckSpace(size_t len) {
  if (reserve_bytes_ == 0) return Status::Ok();  // real ENOSPC only
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) != 0) {
    return Status::FromErrno(errno, "statvfs " + dir_);
  }
  uint64_t avail =
      static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  if (avail < reserve_bytes_ || avail - reserve_bytes_ < len) {
    return NoSpaceStatus("writing a chunk of " + std::to_string(len) +
                         " bytes");
  }
  return Status::Ok();
}

Status ChunkStore::EnsureDurableDir(const std::string& path,
                                    const std::string& parent) {
  {
    std::lock_guard<std::mutex> lock(durable_mu_);
    if (durable_dirs_.count(path)) return Status::Ok();
  }
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    int err = errno;
    if (IsNoSpace(err)) return NoSpaceStatus("creating directory " + path);
    return Status::FromErrno(err, "mkdir " + path);
  }
  // Whether we or a concurrent writer created it, its entry is durable only
  // once the parent is fsynced; do it before trusting the directory.
  STRIPEFS_RETURN_IF_ERROR(FsyncDir(parent));
  std::lock_guard<std::mutex> lock(durable_mu_);
  durable_dirs_.insert(path);
  return Status::Ok();
}

Status ChunkStore::EnsureDataDirs(const ChunkId& id) {
  std::string inode_dir = data_dir_ + "/" + Hex16(id.inode);
  std::string bucket_dir =
      inode_dir + "/" + HexShort(id.stripe >> kStripeBucketShift);
  STRIPEFS_RETURN_IF_ERROR(EnsureDurableDir(inode_dir, data_dir_));
  return EnsureDurableDir(bucket_dir, inode_dir);
}

Status ChunkStore::WriteChunk(const ChunkId& id, uint64_t version,
                              std::span<const uint8_t> data) {
  const std::string name = DescribeChunk(id, version);
  if (version == 0) {
    return Status::InvalidArgument("cannot write " + name +
                                   ": version 0 is not a valid chunk version");
  }
  if (data.size() > options_.max_chunk_bytes) {
    return Status::InvalidArgument(
        "cannot write " + name + ": " + std::to_string(data.size()) +
        " bytes exceed the store's max_chunk_bytes of " +
        std::to_string(options_.max_chunk_bytes));
  }
  const uint32_t crc = ec::Crc32c(data.data(), data.size());
  const std::string key = EncodeChunkKey(id, version);

  std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));

  bool existed = false;
  {
    std::string old;
    rocksdb::Status s = db_->Get({}, key, &old);
    if (s.ok()) {
      auto ov = DecodeChunkValue(old);
      if (ov.ok()) {
        if (ov->length != data.size()) {
          return Status::Exists(
              "cannot write " + name + ": it is already stored with " +
              std::to_string(ov->length) + " bytes, this write has " +
              std::to_string(data.size()) +
              "; chunk versions are immutable (a rewrite must have the same "
              "length)");
        }
        existed = true;
      }
      // A malformed entry is simply replaced (and stays uncounted until
      // the next recount).
    } else if (!s.IsNotFound()) {
      return Status::IoError("chunk index lookup for " + name +
                             " failed: " + RocksMessage(s));
    }
  }

  STRIPEFS_RETURN_IF_ERROR(CheckSpace(data.size()));

  // 1. Temp file, fully written and synced.
  std::string tmp = tmp_dir_ + "/" + tmp_prefix_ +
                    std::to_string(tmp_seq_.fetch_add(1)) + ".tmp";
  UniqueFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    int err = errno;
    if (IsNoSpace(err)) return NoSpaceStatus("creating a temp file");
    return Status::FromErrno(err, "create " + tmp);
  }
  auto fail_tmp = [&](const Status& st, const char* step) -> Status {
    fd.Reset();
    ::unlink(tmp.c_str());
    if (IsNoSpace(st.code())) {
      return NoSpaceStatus(std::string(step) + " " + name);
    }
    return st.Annotate(std::string("chunk store ") + dir_ + ": " + step + " " +
                       name);
  };
  {
    Status st = io_->WriteAndSync(fd.get(), data.data(), data.size());
    if (!st.ok()) return fail_tmp(st, "writing");
  }
  if (::close(fd.Release()) != 0) {
    return fail_tmp(Status::FromErrno(errno, "close"), "closing");
  }

  // 2. Rename into place, directory synced.
  const std::string final_path = DataPath(id, version);
  STRIPEFS_RETURN_IF_ERROR(
      MoveIntoPlace(id, tmp, final_path, existed, "storing " + name));

  // 3. Index entry, synced: from here on the chunk exists.
  ChunkIndexValue v;
  v.length = static_cast<uint32_t>(data.size());
  v.crc32c = crc;
  v.block_shift = kChunkCrcBlockShift;
  v.block_crcs =
      ComputeBlockCrcs(data.data(), data.size(), kChunkCrcBlockShift);
  return IndexPlaced(key, v, final_path, existed, name);
}

Status ChunkStore::MoveIntoPlace(const ChunkId& id, const std::string& tmp,
                                 const std::string& final_path, bool existed,
                                 const std::string& what) {
  std::shared_lock<std::shared_mutex> dirs(dirs_mu_);
  Status st = EnsureDataDirs(id);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    if (IsNoSpace(err)) return NoSpaceStatus(what);
    return Status::FromErrno(err, "rename " + tmp + " to " + final_path)
        .Annotate("chunk store " + dir_ + ": " + what);
  }
  st = FsyncDir(final_path.substr(0, final_path.rfind('/')));
  if (!st.ok()) {
    if (!existed) ::unlink(final_path.c_str());
    if (IsNoSpace(st.code())) return NoSpaceStatus(what);
    return st;
  }
  return Status::Ok();
}

Status ChunkStore::IndexPlaced(const std::string& key, const ChunkIndexValue& v,
                               const std::string& final_path, bool existed,
                               const std::string& name) {
  Status st = IndexWrite(
      [&](rocksdb::WriteBatch* b) { b->Put(key, EncodeChunkValue(v)); });
  if (!st.ok()) {
    // Without the entry the file is an orphan; remove it now. (A rewrite
    // keeps its file: the old entry still describes it and reads verify.)
    if (!existed) ::unlink(final_path.c_str());
    if (IsNoSpace(st.code())) return NoSpaceStatus("indexing " + name);
    return st.Annotate("indexing " + name);
  }
  if (!existed) {
    chunks_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(v.length, std::memory_order_relaxed);
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ChunkStore::IndexWrite(
    const std::function<void(rocksdb::WriteBatch*)>& fill) {
  rocksdb::WriteBatch batch;
  fill(&batch);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = db_->Write(wo, &batch);
  if (!s.ok()) {
    // After a failed WAL write RocksDB stops accepting writes until
    // resumed; try once (succeeds when the cause, e.g. a full disk, is
    // gone) and retry the write.
    rocksdb::Status r = db_->Resume();
    if (r.ok()) {
      s = db_->Write(wo, &batch);
    } else {
      Log(dir_, "chunk index write failed (%s); resume failed: %s",
          s.ToString().c_str(), r.ToString().c_str());
    }
  }
  if (s.ok()) return Status::Ok();
  const std::string text = s.ToString();
  bool nospace = s.IsNoSpace() ||
                 text.find("No space left") != std::string::npos ||
                 text.find("Disk quota exceeded") != std::string::npos;
  if (nospace) {
    return Status::NoSpace("chunk index of " + dir_ +
                           " cannot be written: " + RocksMessage(s));
  }
  return Status::IoError("chunk index of " + dir_ +
                         " cannot be written: " + RocksMessage(s));
}

Status ChunkStore::DropEntry(const ChunkId& id, uint64_t version) {
  const std::string key = EncodeChunkKey(id, version);
  std::string val;
  if (db_->Get({}, key, &val).ok()) {
    auto v = DecodeChunkValue(val);
    STRIPEFS_RETURN_IF_ERROR(
        IndexWrite([&](rocksdb::WriteBatch* b) { b->Delete(key); }));
    if (v.ok()) {
      chunks_.fetch_sub(1, std::memory_order_relaxed);
      bytes_.fetch_sub(v->length, std::memory_order_relaxed);
    }
  }
  return Status::Ok();
}

void ChunkStore::NoteMissing(const ChunkId& id, uint64_t version) {
  missing_.fetch_add(1, std::memory_order_relaxed);
  Log(dir_, "%s is indexed but its data file %s is missing; entry dropped",
      DescribeChunk(id, version).c_str(), DataPath(id, version).c_str());
}

Status ChunkStore::ReadVerified(const ChunkId& id, uint64_t version,
                                const ChunkIndexValue& v,
                                std::vector<uint8_t>* out) {
  return ReadVerifiedRange(id, version, v, 0, v.length, out);
}

Status ChunkStore::ReadVerifiedRange(const ChunkId& id, uint64_t version,
                                     const ChunkIndexValue& v, uint32_t offset,
                                     uint32_t length,
                                     std::vector<uint8_t>* out) {
  const std::string name = DescribeChunk(id, version);
  const std::string path = DataPath(id, version);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(path + " is missing");
    return Status::FromErrno(err, "open " + path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return Status::FromErrno(errno, "fstat " + path);
  }
  if (static_cast<uint64_t>(st.st_size) != v.length) {
    crc_errors_.fetch_add(1, std::memory_order_relaxed);
    return Status::Corruption(
        name + " in " + dir_ + ": data file " + path + " has " +
        std::to_string(st.st_size) + " bytes, the index says " +
        std::to_string(v.length) + "; treat the chunk as lost and repair it");
  }
  // What to read and verify: the whole chunk against its CRC, or (with block
  // CRCs and a partial range) just the blocks the range covers.
  const bool by_blocks =
      v.block_shift != 0 && !(offset == 0 && length == v.length);
  uint64_t lo = 0, hi = v.length;
  if (by_blocks) {
    const uint64_t block = uint64_t{1} << v.block_shift;
    lo = offset / block * block;
    hi = std::min<uint64_t>(
        v.length, (uint64_t{offset} + length + block - 1) / block * block);
  }
  std::vector<uint8_t> buf(hi - lo);
  if (!buf.empty()) {
    auto got = io_->Read(fd.get(), buf.data(), buf.size(), lo);
    if (!got.ok()) {
      Status e = got.status().Annotate("reading " + path);
      // ENOENT here cannot mean "file missing" to the caller.
      return e.code() == ENOENT ? Status::IoError(e.message()) : e;
    }
    if (*got != buf.size()) {
      crc_errors_.fetch_add(1, std::memory_order_relaxed);
      return Status::Corruption(name + " in " + dir_ + ": data file " + path +
                                " ended after " + std::to_string(lo + *got) +
                                " of " + std::to_string(v.length) + " bytes");
    }
  }
  auto mismatch = [&](uint32_t stored, uint32_t computed,
                      const std::string& what) {
    crc_errors_.fetch_add(1, std::memory_order_relaxed);
    char detail[96];
    std::snprintf(detail, sizeof(detail),
                  " (stored CRC32C 0x%08x, computed 0x%08x)", stored, computed);
    return Status::Corruption(name + " in " + dir_ + " failed CRC32C " +
                              "verification of " + what + detail + ", file " +
                              path + "; treat the chunk as lost and repair it");
  };
  if (by_blocks) {
    const uint64_t block = uint64_t{1} << v.block_shift;
    for (uint64_t b = lo / block; b * block < hi; ++b) {
      const uint64_t start = b * block - lo;
      const uint64_t n = std::min<uint64_t>(block, hi - b * block);
      const uint32_t crc = ec::Crc32c(buf.data() + start, n);
      if (crc != v.block_crcs[b]) {
        return mismatch(v.block_crcs[b], crc, "block " + std::to_string(b));
      }
    }
  } else {
    const uint32_t crc = ec::Crc32c(buf.data(), buf.size());
    if (crc != v.crc32c) return mismatch(v.crc32c, crc, "the whole chunk");
  }
  if (lo == offset && buf.size() == length) {
    *out = std::move(buf);
  } else {
    out->assign(buf.begin() + (offset - lo),
                buf.begin() + (offset - lo + length));
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> ChunkStore::ReadChunk(const ChunkId& id,
                                                   uint64_t version,
                                                   uint32_t offset,
                                                   uint32_t length) {
  const std::string name = DescribeChunk(id, version);
  const std::string key = EncodeChunkKey(id, version);
  const std::string path = DataPath(id, version);
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id));
    std::string raw;
    rocksdb::Status s = db_->Get({}, key, &raw);
    if (s.IsNotFound()) {
      return Status::NotFound(name + " is not stored in " + dir_);
    }
    if (!s.ok()) {
      return Status::IoError("chunk index lookup for " + name + " in " + dir_ +
                             " failed: " + RocksMessage(s));
    }
    auto v = DecodeChunkValue(raw);
    if (!v.ok()) {
      malformed_.fetch_add(1, std::memory_order_relaxed);
      return v.status().Annotate("index entry of " + name + " in " + dir_);
    }
    if (static_cast<uint64_t>(offset) + length > v->length) {
      return Status::InvalidArgument(
          "read of [" + std::to_string(offset) + ", " +
          std::to_string(static_cast<uint64_t>(offset) + length) + ") of " +
          name + " is past its end (" + std::to_string(v->length) + " bytes)");
    }
    std::vector<uint8_t> buf;
    Status vs = ReadVerifiedRange(id, version, *v, offset, length, &buf);
    if (vs.code() == ENOENT) {
      // Indexed but gone: drop the entry (exclusively; a concurrent rewrite
      // may have brought the file back, then read again).
      chunk_lock.unlock();
      std::unique_lock<std::shared_mutex> excl(LockFor(id));
      if (::access(path.c_str(), F_OK) == 0) continue;
      std::string again;
      if (!db_->Get({}, key, &again).ok()) {
        return Status::NotFound(name + " is not stored in " + dir_);
      }
      NoteMissing(id, version);
      Status st = DropEntry(id, version);
      if (!st.ok()) {
        Log(dir_, "cannot drop index entry of missing %s: %s", name.c_str(),
            st.ToString().c_str());
      }
      return Status::NotFound(name + " is indexed in " + dir_ +
                              " but its data file is missing (counted, entry "
                              "dropped); repair rebuilds it");
    }
    if (!vs.ok()) return vs;
    reads_.fetch_add(1, std::memory_order_relaxed);
    return buf;
  }
  return Status::IoError("reading " + name + " in " + dir_ +
                         " raced with concurrent rewrites; retry");
}

Status ChunkStore::DeleteChunk(const ChunkId& id, uint64_t keep_version) {
  return DeleteMatching(
      id, [keep_version](uint64_t v) { return v != keep_version; });
}

Status ChunkStore::DeleteChunkVersion(const ChunkId& id, uint64_t version) {
  return DeleteMatching(id, [version](uint64_t v) { return v == version; });
}

Status ChunkStore::DeleteMatching(const ChunkId& id,
                                  const std::function<bool(uint64_t)>& doomed) {
  std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
  const std::string prefix = EncodeChunkIdPrefix(id);
  struct Victim {
    uint64_t version;
    int64_t length;  // -1 when the entry is malformed
  };
  std::vector<Victim> victims;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
         it->Next()) {
      ChunkId kid;
      uint64_t ver;
      rocksdb::Slice k = it->key();
      if (!DecodeChunkKey(std::string_view(k.data(), k.size()), &kid, &ver)
               .ok()) {
        continue;
      }
      if (!doomed(ver)) continue;
      auto v = DecodeChunkValue(
          std::string_view(it->value().data(), it->value().size()));
      victims.push_back({ver, v.ok() ? static_cast<int64_t>(v->length) : -1});
    }
    if (!it->status().ok()) {
      return Status::IoError("scanning chunk index of " + dir_ + ": " +
                             RocksMessage(it->status()));
    }
  }
  if (victims.empty()) return Status::Ok();
  // Files first, then the index entries. This order frees space before the
  // index is written, so deleting works on a full disk (where RocksDB may
  // have stopped after a failed WAL write and needs room to resume). A crash
  // in between leaves entries without files: Sweep drops them (counted as
  // missing), and they were being deleted anyway.
  for (const auto& vic : victims) {
    std::string path = DataPath(id, vic.version);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      // Once the entry is gone the file is an orphan that Sweep removes.
      Log(dir_, "cannot remove %s: %s (Sweep will retry)", path.c_str(),
          std::strerror(errno));
    }
  }
  Status st = IndexWrite([&](rocksdb::WriteBatch* b) {
    for (const auto& vic : victims) b->Delete(EncodeChunkKey(id, vic.version));
  });
  if (!st.ok()) {
    return st.Annotate("deleting " + DescribeChunk(id, victims[0].version) +
                       " (and " + std::to_string(victims.size() - 1) +
                       " other versions): files removed, index entries left "
                       "(reads report them missing; Sweep drops them)");
  }
  for (const auto& vic : victims) {
    if (vic.length >= 0) {
      chunks_.fetch_sub(1, std::memory_order_relaxed);
      bytes_.fetch_sub(static_cast<uint64_t>(vic.length),
                       std::memory_order_relaxed);
    }
  }
  return Status::Ok();
}

Status ChunkStore::CloneChunk(const ChunkId& id, uint64_t from_version,
                              uint64_t to_version, uint32_t length) {
  const std::string from_name = DescribeChunk(id, from_version);
  if (to_version == 0 || to_version == from_version) {
    return Status::InvalidArgument("cannot clone " + from_name +
                                   " to version " + std::to_string(to_version) +
                                   ": needs a different, non-zero version");
  }
  {
    std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
    std::string raw;
    rocksdb::Status s = db_->Get({}, EncodeChunkKey(id, from_version), &raw);
    if (s.IsNotFound()) {
      return Status::NotFound("cannot clone " + from_name +
                              ": it is not stored in " + dir_);
    }
    if (!s.ok()) {
      return Status::IoError("chunk index lookup for " + from_name +
                             " failed: " + RocksMessage(s));
    }
    auto v = DecodeChunkValue(raw);
    if (!v.ok()) {
      malformed_.fetch_add(1, std::memory_order_relaxed);
      return v.status().Annotate("index entry of " + from_name);
    }
    if (length > v->length) {
      return Status::InvalidArgument("cannot clone " + std::to_string(length) +
                                     " bytes of " + from_name + ": it has " +
                                     std::to_string(v->length));
    }
    if (length == v->length) {
      bool linked = false;
      Status st = CloneByLinkLocked(id, from_version, to_version, *v, &linked);
      if (!st.ok() || linked) return st;
    }
  }
  // A prefix, or no hard links on this file system: copy.
  return ChunkService::CloneChunk(id, from_version, to_version, length);
}

Status ChunkStore::CloneByLinkLocked(const ChunkId& id, uint64_t from_version,
                                     uint64_t to_version,
                                     const ChunkIndexValue& v, bool* linked) {
  const std::string to_name = DescribeChunk(id, to_version);
  const std::string to_key = EncodeChunkKey(id, to_version);
  bool existed = false;
  {
    std::string old;
    rocksdb::Status s = db_->Get({}, to_key, &old);
    if (s.ok()) {
      auto ov = DecodeChunkValue(old);
      if (ov.ok()) {
        if (ov->length != v.length) {
          return Status::Exists("cannot clone to " + to_name +
                                ": it is already stored with " +
                                std::to_string(ov->length) + " bytes, not " +
                                std::to_string(v.length));
        }
        existed = true;
      }
    } else if (!s.IsNotFound()) {
      return Status::IoError("chunk index lookup for " + to_name +
                             " failed: " + RocksMessage(s));
    }
  }
  STRIPEFS_RETURN_IF_ERROR(CheckSpace(0));
  // Never propagate a corrupt source.
  std::vector<uint8_t> scratch;
  Status vs = ReadVerified(id, from_version, v, &scratch);
  if (vs.code() == ENOENT) {
    NoteMissing(id, from_version);
    (void)DropEntry(id, from_version);
    return Status::NotFound("cannot clone " + DescribeChunk(id, from_version) +
                            ": its data file is missing (counted, entry "
                            "dropped); repair rebuilds it");
  }
  STRIPEFS_RETURN_IF_ERROR(vs);

  const std::string from_path = DataPath(id, from_version);
  const std::string tmp = tmp_dir_ + "/" + tmp_prefix_ +
                          std::to_string(tmp_seq_.fetch_add(1)) + ".tmp";
  if (::link(from_path.c_str(), tmp.c_str()) != 0) {
    int err = errno;
    if (IsNoSpace(err)) return NoSpaceStatus("cloning to " + to_name);
    if (err == EPERM || err == EOPNOTSUPP || err == EMLINK || err == EXDEV) {
      return Status::Ok();  // *linked stays false: the caller copies
    }
    return Status::FromErrno(err, "link " + from_path + " to " + tmp);
  }
  const std::string final_path = DataPath(id, to_version);
  STRIPEFS_RETURN_IF_ERROR(
      MoveIntoPlace(id, tmp, final_path, existed, "cloning to " + to_name));
  STRIPEFS_RETURN_IF_ERROR(
      IndexPlaced(to_key, v, final_path, existed, to_name));
  clones_.fetch_add(1, std::memory_order_relaxed);
  *linked = true;
  return Status::Ok();
}

Result<std::vector<ChunkInfo>> ChunkStore::ListChunks(const ChunkInfo& after,
                                                      uint32_t limit) {
  if (limit == 0) {
    return Status::InvalidArgument("ListChunks needs a limit > 0");
  }
  std::vector<ChunkInfo> out;
  const std::string start = EncodeChunkKey(after.id, after.version);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
  for (it->Seek(start); it->Valid() && out.size() < limit; it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() == 0 || k[0] != kChunkKeyPrefix) break;
    if (k.compare(start) == 0) continue;
    ChunkInfo info;
    if (!DecodeChunkKey(std::string_view(k.data(), k.size()), &info.id,
                        &info.version)
             .ok()) {
      continue;  // counted at open; cannot be named as a chunk
    }
    auto v = DecodeChunkValue(
        std::string_view(it->value().data(), it->value().size()));
    if (!v.ok()) continue;  // reads of it return EBADMSG
    info.length = v->length;
    info.crc32c = v->crc32c;
    out.push_back(info);
  }
  if (!it->status().ok()) {
    return Status::IoError("scanning chunk index of " + dir_ + ": " +
                           RocksMessage(it->status()));
  }
  return out;
}

Result<ChunkStoreStats> ChunkStore::Stats() {
  ChunkStoreStats s;
  s.chunks = chunks_.load();
  s.bytes_stored = bytes_.load();
  s.crc_errors = crc_errors_.load();
  s.writes = writes_.load();
  s.reads = reads_.load();
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) != 0) {
    return Status::FromErrno(errno, "statvfs " + dir_);
  }
  const uint64_t frsize = vfs.f_frsize;
  s.bytes_free = static_cast<uint64_t>(vfs.f_bavail) * frsize;
  s.bytes_capacity = static_cast<uint64_t>(vfs.f_blocks) * frsize;
  s.bytes_reserved = reserve_bytes_;
  s.fs_id = static_cast<uint64_t>(vfs.f_fsid);
  return s;
}

ChunkStoreCounters ChunkStore::Counters() const {
  ChunkStoreCounters c;
  c.missing_chunks = missing_.load();
  c.malformed_entries = malformed_.load();
  c.nospace_refusals = nospace_.load();
  c.orphans_removed = orphans_.load();
  c.temp_files_removed = temps_.load();
  c.clones_linked = clones_.load();
  return c;
}

Result<SweepReport> ChunkStore::Sweep() {
  SweepReport rep;

  // 1. tmp/: everything not written by this instance is a leftover.
  {
    STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> names,
                              ListDir(tmp_dir_));
    for (const auto& n : names) {
      if (n.rfind(tmp_prefix_, 0) == 0) continue;  // in flight
      std::string p = tmp_dir_ + "/" + n;
      if (::unlink(p.c_str()) == 0) ++rep.temp_files_removed;
    }
  }

  // 2. data/: files without an index entry are orphans.
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> inode_dirs,
                            ListDir(data_dir_));
  std::vector<std::string> bucket_paths;
  std::vector<std::string> inode_paths;
  for (const auto& idir : inode_dirs) {
    uint64_t inode;
    std::string ipath = data_dir_ + "/" + idir;
    if (idir.size() != 16 || !ParseHex64(idir, &inode)) {
      ++rep.unknown_files;
      continue;
    }
    inode_paths.push_back(ipath);
    auto buckets = ListDir(ipath);
    if (!buckets.ok()) {
      ++rep.unknown_files;  // e.g. a stray file named like an inode
      continue;
    }
    for (const auto& b : *buckets) {
      uint64_t bucket;
      std::string bpath = ipath + "/" + b;
      if (!ParseHex64(b, &bucket)) {
        ++rep.unknown_files;
        continue;
      }
      bucket_paths.push_back(bpath);
      auto files = ListDir(bpath);
      if (!files.ok()) {
        ++rep.unknown_files;
        continue;
      }
      for (const auto& f : *files) {
        ChunkId id;
        uint64_t version;
        id.inode = inode;
        if (!ParseChunkFileName(f, &id.stripe, &id.index, &version) ||
            (id.stripe >> kStripeBucketShift) != bucket) {
          ++rep.unknown_files;
          continue;
        }
        std::unique_lock<std::shared_mutex> lock(LockFor(id));
        std::string val;
        rocksdb::Status s = db_->Get({}, EncodeChunkKey(id, version), &val);
        if (s.IsNotFound()) {
          std::string p = bpath + "/" + f;
          if (::unlink(p.c_str()) == 0) ++rep.orphans_removed;
        } else if (!s.ok()) {
          return Status::IoError("chunk index lookup during sweep of " + dir_ +
                                 " failed: " + RocksMessage(s));
        }
      }
    }
  }

  // 3. index entries whose file is gone.
  struct Missing {
    ChunkId id;
    uint64_t version;
  };
  std::vector<Missing> missing;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
    for (it->Seek(std::string(1, kChunkKeyPrefix)); it->Valid(); it->Next()) {
      rocksdb::Slice k = it->key();
      if (k.size() == 0 || k[0] != kChunkKeyPrefix) break;
      Missing m;
      if (!DecodeChunkKey(std::string_view(k.data(), k.size()), &m.id,
                          &m.version)
               .ok()) {
        continue;
      }
      if (::access(DataPath(m.id, m.version).c_str(), F_OK) != 0 &&
          errno == ENOENT) {
        missing.push_back(m);
      }
    }
    if (!it->status().ok()) {
      return Status::IoError("scanning chunk index of " + dir_ + ": " +
                             RocksMessage(it->status()));
    }
  }
  for (const auto& m : missing) {
    std::unique_lock<std::shared_mutex> lock(LockFor(m.id));
    std::string val;
    if (!db_->Get({}, EncodeChunkKey(m.id, m.version), &val).ok()) continue;
    if (::access(DataPath(m.id, m.version).c_str(), F_OK) == 0) continue;
    NoteMissing(m.id, m.version);
    STRIPEFS_RETURN_IF_ERROR(DropEntry(m.id, m.version));
    ++rep.missing_dropped;
  }

  // 4. Empty directories (no writer may be between mkdir and rename).
  {
    std::unique_lock<std::shared_mutex> dirs(dirs_mu_);
    std::lock_guard<std::mutex> durable(durable_mu_);
    for (const auto& b : bucket_paths) {
      if (::rmdir(b.c_str()) == 0) {
        ++rep.empty_dirs_removed;
        durable_dirs_.erase(b);
      }
    }
    for (const auto& p : inode_paths) {
      if (::rmdir(p.c_str()) == 0) {
        ++rep.empty_dirs_removed;
        durable_dirs_.erase(p);
      }
    }
  }

  orphans_.fetch_add(rep.orphans_removed, std::memory_order_relaxed);
  temps_.fetch_add(rep.temp_files_removed, std::memory_order_relaxed);
  return rep;
}

}  // namespace stripefs

// MountService: one stripefs mount, from options to unmount -- what
// `stripefs mount` runs, and what the fs tests mount through, so both serve
// the same configuration.
//
// Start() validates the options (every numeric one against its range below),
// checks the mountpoint, opens the volume (embedded directory or cluster),
// derives the FUSE options from the volume geometry (max_pages and max_write
// to cover a stripe, raising /proc/sys/fs/fuse/max_pages_limit when needed
// and allowed; align_page_order = log2(stripe size)), mounts, starts the
// session and waits for the kernel's INIT. Any failure returns an error and
// leaves nothing behind: no mount, no threads, and no volume directory if
// this attempt created it.
//
// Ownership: owns the Volume, the StripeFs, the Session, the mount, the
// stats socket and pid file, and the enable_uring knob (restored when the
// service ends). The destructor is Stop(). Thread-safety: Start, Serve and
// Stop from one thread; the accessors may be used from any thread while
// the service runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/client/volume.h"
#include "common/status.h"
#include "common/stop_signals.h"
#include "fs/stripe_fs.h"
#include "fuse/session.h"

namespace stripefs::fuse {
class FuseMount;
struct MountOptions;
class ScopedKnob;
}  // namespace stripefs::fuse

namespace stripefs::fs {

class StatsServer;

// Inclusive range of a numeric mount option. The CLI checks the same
// constants at parse time (CLI::Range); Start() checks them again.
struct OptionRange {
  int64_t min, max;
  bool Contains(int64_t v) const { return v >= min && v <= max; }
  std::string ToString() const;  // "[1, 64]"
};
// /dev/fuse worker threads: each holds request buffers of max_write.
inline constexpr OptionRange kDevThreadsRange{1, 64};
// io-uring READ workers, shared by all queues (0: READs on the queue thread).
inline constexpr OptionRange kUringReadWorkersRange{0, 64};
// io-uring queues (MountServiceOptions::uring_queues); a mount also checks
// them against the possible CPUs.
inline constexpr OptionRange kUringQueuesRange{1, 4096};
// Idle flush of buffered partial stripes, and the frontier hold (ms).
inline constexpr OptionRange kIdleFlushMsRange{1, 3'600'000};
inline constexpr OptionRange kFrontierHoldMsRange{0, 3'600'000};
// How long the kernel keeps a name's entry without a LOOKUP (ms;
// StripeFsOptions::entry_timeout).
inline constexpr OptionRange kEntryTimeoutMsRange{0, 3'600'000};
inline constexpr OptionRange kAttrTimeoutMsRange{0, 3'600'000};
// Stripe buffer memory cap (MiB).
inline constexpr OptionRange kMemoryCapMibRange{1, 1 << 20};
// The mount's bdi max_ratio (percent).
inline constexpr OptionRange kMaxRatioRange{0, 100};
// Cluster mode: how long metadata calls wait out an unreachable metad (s).
inline constexpr OptionRange kMetaHoldSRange{0, 3600};
// Pipelined stripe writes in flight per mount (0 = inside the WRITE) and
// per file.
inline constexpr OptionRange kSendWindowRange{0, 256};
inline constexpr OptionRange kFileSendWindowRange{1, 256};
// Geometry of a new embedded volume.
inline constexpr OptionRange kDataChunksRange{1, 31};    // k
inline constexpr OptionRange kParityChunksRange{1, 31};  // m, k + m <= 32
inline constexpr uint32_t kMaxStripeWidth = 32;
inline constexpr OptionRange kCellSizeRange{4096, 64 << 20};  // multiple of 4K

// Geometry asked for on the command line: unset fields take the defaults of
// a new volume and are not compared with an existing one.
struct GeometryChoice {
  std::optional<uint32_t> k, m, cell_size;
  bool any() const { return k || m || cell_size; }
  Geometry Resolve() const;
};
// EINVAL naming the allowed values when the choice is out of range.
Status ValidateGeometryChoice(const GeometryChoice& g);

// What to do about a corrupted metadata store in `meta_dir` (EBADMSG at
// open): restore it, or salvage it with `stripefs meta-repair`, then scrub.
std::string CorruptMetadataFix(const std::string& meta_dir);

struct MountServiceOptions {
  std::string mountpoint;  // absolute
  // Embedded: the volume directory (created if absent or empty). Cluster:
  // meta_address ("HOST:PORT") and key_file; volume_dir stays empty.
  std::string volume_dir;
  std::string meta_address, key_file;
  GeometryChoice geometry;              // embedded only
  uint32_t root_uid = 0, root_gid = 0;  // owner of a new volume's root

  StripeFsOptions fs;  // coalescing, idle flush, memory cap; mountpoint set
  fuse::TransportChoice transport = fuse::TransportChoice::kAuto;
  int dev_threads = 4;
  // /dev/fuse workers poll() instead of blocking reads: the pre-session-6
  // wait (every request wakes every idle worker), kept for A/B benches.
  bool dev_poll = false;
  int uring_read_workers = 4;  // threads serving io-uring READs (0: inline)
  // io-uring queues on CPUs 0..n-1; 0 = one per possible CPU, else 1 to the
  // possible CPUs (fuse::SessionOptions::uring_queues).
  int uring_queues = 0;
  bool uring_inline_lone_reads = true;  // a lone READ on an idle queue inline
  // A READ for the workers is first tried on the queue thread without
  // blocking (fuse::SessionOptions::uring_try_reads).
  bool uring_try_reads = true;
  bool writeback_cache = true;
  bool align = true;  // request opt-alignment to the stripe size
  // FUSE_COMPOUND: accept it when the kernel offers it (compound), and if
  // so, answer every one ENOSYS (refuse_compound: tests the kernel's
  // fallback to single requests).
  bool compound = true;
  bool refuse_compound = false;
  bool enable_uring = false;  // set the fuse module's enable_uring (root)
  int max_ratio = -1;         // bdi max_ratio once mounted; -1 = leave it
  int meta_hold_s = 60;       // cluster: wait for metad this long, then EIO
  bool secure_wire = false;   // cluster: encrypt RPC traffic (-o secure)
  // -o degraded_writes=refuse: a stripe write whose chunk writes the stores
  // refuse for space fails ENOSPC instead of committing degraded
  // (StripeClientOptions::refuse_degraded_enospc). Default allow.
  bool refuse_degraded_writes = false;
  // Embedded volume: namespace changes (create, unlink, rename, link,
  // setattr without a size change, xattrs) are acknowledged once written to
  // the metadata WAL and synced within this delay, as metad does by default
  // (its --namespace-sync-ms; docs/metadata.md, "Durability of namespace
  // operations"); fsync, fsyncdir and syncfs sync them. 0, or -o sync or
  // -o dirsync: each synced before it returns.
  std::chrono::milliseconds namespace_sync{5};
  // -o values (comma lists). Ours: allow_other / no_allow_other (default:
  // allow_other when running as root, the kernel checking permissions),
  // default_permissions / no_default_permissions (default on; off also
  // turns POSIX ACLs off, and is refused with allow_other: nothing would
  // check permissions), auto_unmount, ro / rw. The standard VFS options
  // (atime, noatime, relatime, strictatime, nodiratime, diratime, lazytime,
  // sync, async, dirsync, nosuid, suid, nodev, dev, noexec, exec) reach the
  // kernel: through libfuse, or set on the mount right after it is made
  // (mount_setattr, reconfigure: root only). The rest go to libfuse as is;
  // what it rejects fails Start() with libfuse's reason.
  std::vector<std::string> mount_options;
  // The source shown in /proc/mounts ("" = the volume's description).
  std::string fsname;
  // Serve `stripefs stat` on the runtime socket and write the pid file.
  bool publish_runtime_files = true;
  // Told the latency of every FUSE request (metrics); not owned, may be
  // null, must outlive the service.
  fuse::RequestObserver* request_observer = nullptr;
};

// EINVAL with a one-line message naming the option and its range.
Status ValidateMountOptions(const MountServiceOptions& o);

class MountService {
 public:
  static Result<std::unique_ptr<MountService>> Start(MountServiceOptions o);
  ~MountService();  // Stop()
  MountService(const MountService&) = delete;
  MountService& operator=(const MountService&) = delete;

  // What was mounted and negotiated, one line each (what `stripefs mount`
  // prints).
  std::vector<std::string> Describe() const;
  // Serves until the file system is unmounted (by `stripefs umount`) or a
  // stop signal arrives on `stop` (then flushes and unmounts). Install
  // `stop` before Start() so a signal during the mount is not lost. Returns
  // why the session ended.
  Status ServeUntilUnmounted(StopSignals& stop);
  // Unmounts (lazily if busy), stops the session, writes what is still
  // buffered and closes the volume. Idempotent; the first error.
  Status Stop();

  StripeFs& fs() { return *fs_; }
  fuse::Session& session() { return *session_; }
  Volume& volume() { return *volume_; }
  const MountServiceOptions& options() const { return o_; }

 private:
  explicit MountService(MountServiceOptions o);
  Status Up();
  Status OpenVolume();
  void DeriveFuseOptions(fuse::SessionOptions* so);
  void PublishRuntimeFiles();
  void RemoveCreatedVolume();

  MountServiceOptions o_;
  bool created_volume_dir_ = false;  // this attempt made the directory
  bool created_volume_ = false;      // ...or filled an empty one
  std::vector<std::string> notes_;   // extra Describe() lines
  std::string permissions_;          // who may use the mount (Describe())
  std::unique_ptr<fuse::ScopedKnob> uring_knob_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<StripeFs> fs_;
  std::unique_ptr<fuse::Session> session_;
  std::unique_ptr<fuse::FuseMount> mount_;
  std::unique_ptr<StatsServer> stats_;
  std::string pidfile_;
  bool stopped_ = false;
};

}  // namespace stripefs::fs

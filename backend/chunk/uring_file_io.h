// UringFileIo: whole-buffer file reads, writes and fdatasync through io_uring
// (liburing), used by ChunkStore for chunk data files.
//
// Keeps a small pool of rings: a call borrows a ring, submits one operation at
// a time (looping on short transfers), and returns the ring; RunBatch
// submits many reads at once (one submission and one wait per ring's worth).
// The pool grows to the number of concurrent callers. If ring setup fails
// (kernel without io_uring, io_uring_disabled sysctl, seccomp), the object
// falls back to pread/pwrite/fdatasync and says so once on stderr.
//
// Thread-safety: every method may be called from many threads at once.
// Owns its rings; file descriptors stay owned by the caller.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

struct io_uring;

namespace stripefs {

class UringFileIo {
 public:
  // `use_io_uring` false forces the pread/pwrite path (tests, debugging).
  // `owner` names the user in the one-time fallback log line.
  UringFileIo(bool use_io_uring, std::string owner);
  ~UringFileIo();
  UringFileIo(const UringFileIo&) = delete;
  UringFileIo& operator=(const UringFileIo&) = delete;

  bool using_io_uring() const { return use_ring_.load(); }

  // Reads up to `len` bytes at `offset`, stopping early only at end of file.
  // Returns the number of bytes read. Errors carry the errno.
  Result<size_t> Read(int fd, uint8_t* buf, size_t len, uint64_t offset);
  // Read, but only from the page cache: preadv2(RWF_NOWAIT) on `fd` (a
  // buffered fd; no ring, nothing that waits for the disk). Returns the
  // bytes read (fewer than `len` only at end of file); WouldBlock (EAGAIN)
  // when some of them are not cached, or the kernel cannot tell without
  // waiting (then `buf` holds unspecified bytes). Other errors carry the
  // errno.
  static Result<size_t> ReadIfCached(int fd, uint8_t* buf, size_t len,
                                     uint64_t offset);
  // Writes all `len` bytes at `offset`. Errors carry the errno (ENOSPC...).
  Status Write(int fd, const uint8_t* buf, size_t len, uint64_t offset);
  // One transfer of RunBatch: up to `len` bytes at `offset` of `fd` into
  // `buf` (a read), or all of them from it (`write`); all borrowed by the
  // call. `got` gets what Read returns (for a write: `len`, or the error).
  struct BatchIo {
    int fd = -1;
    uint8_t* buf = nullptr;
    size_t len = 0;
    uint64_t offset = 0;
    bool write = false;
    Result<size_t> got = Status::Unavailable("not run");
  };
  // Runs every transfer of `ios` with one io_uring submission and one wait
  // per kBatchDepth of them, so a batch of small transfers costs one
  // wake-up instead of one each. Each has Read's or Write's semantics (a
  // short transfer is finished with them; pread/pwrite each without
  // io_uring). Transfers are independent and may complete in any order.
  static constexpr size_t kBatchDepth = 64;
  void RunBatch(std::span<BatchIo> ios);
  // fdatasync(fd).
  Status DataSync(int fd);
  // io_uring submissions made by Read, Write and RunBatch (counters and
  // tests: a RunBatch of 2 to kBatchDepth transfers makes one).
  uint64_t submissions() const {
    return submissions_.load(std::memory_order_relaxed);
  }
  // Write(fd, buf, len, 0) then DataSync(fd); with io_uring both go in one
  // submission (the fdatasync linked behind the write).
  Status WriteAndSync(int fd, const uint8_t* buf, size_t len);

 private:
  struct RingDeleter {
    void operator()(io_uring* r) const;
  };
  using RingPtr = std::unique_ptr<io_uring, RingDeleter>;

  // Borrows a ring (creating one if the pool is empty); null when io_uring
  // is unusable (then use_ring_ is false from then on).
  RingPtr Acquire();
  void Release(RingPtr ring);
  // Runs one prepared operation; returns cqe->res (negative errno) or a
  // ring-level error, in which case the ring must not be reused.
  int SubmitOne(io_uring* ring, bool* ring_broken);

  enum class Direction { kRead, kWrite };
  // The loop behind Read and Write: moves `len` bytes in kMaxOp pieces
  // through a borrowed ring (or pread/pwrite when there is none). A read
  // stops early at end of file; a write that makes no progress is EIO.
  Result<size_t> Transfer(Direction dir, int fd, uint8_t* buf, size_t len,
                          uint64_t offset);

  std::string owner_;
  std::atomic<bool> use_ring_;
  std::mutex mu_;
  std::vector<RingPtr> pool_;
  bool warned_ = false;
  std::atomic<uint64_t> submissions_{0};
};

}  // namespace stripefs

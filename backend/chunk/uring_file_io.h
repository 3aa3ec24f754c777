// UringFileIo: whole-buffer file reads, writes and fdatasync through io_uring
// (liburing), used by ChunkStore for chunk data files.
//
// Keeps a small pool of rings: a call borrows a ring, submits one operation at
// a time (looping on short transfers), and returns the ring. The pool grows to
// the number of concurrent callers. If ring setup fails (kernel without
// io_uring, io_uring_disabled sysctl, seccomp), the object falls back to
// pread/pwrite/fdatasync and says so once on stderr.
//
// Thread-safety: every method may be called from many threads at once.
// Owns its rings; file descriptors stay owned by the caller.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
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
  // Writes all `len` bytes at `offset`. Errors carry the errno (ENOSPC...).
  Status Write(int fd, const uint8_t* buf, size_t len, uint64_t offset);
  // fdatasync(fd).
  Status DataSync(int fd);
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
};

}  // namespace stripefs

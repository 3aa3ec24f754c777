#include "backend/chunk/uring_file_io.h"

#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace stripefs {
namespace {

// Deep enough for RunBatch's waves; a ring costs a few KiB.
constexpr unsigned kQueueDepth = UringFileIo::kBatchDepth;
// Per-operation cap: io_uring read/write take an unsigned length, and a
// kernel may transfer at most MAX_RW_COUNT (~2 GiB) at once anyway.
constexpr size_t kMaxOp = size_t{1} << 30;

// io_uring_wait_cqe, again after a signal: < 0 means the ring still owes
// completions and must not be reused.
int WaitCqe(io_uring* ring, io_uring_cqe** cqe) {
  int rc;
  do {
    rc = io_uring_wait_cqe(ring, cqe);
  } while (rc == -EINTR);
  return rc;
}

}  // namespace

void UringFileIo::RingDeleter::operator()(io_uring* r) const {
  io_uring_queue_exit(r);
  delete r;
}

UringFileIo::UringFileIo(bool use_io_uring, std::string owner)
    : owner_(std::move(owner)), use_ring_(use_io_uring) {
  if (use_ring_) {
    // Probe once so the fallback decision (and its log line) happens at
    // construction rather than on the first I/O.
    RingPtr r = Acquire();
    if (r) Release(std::move(r));
  }
}

UringFileIo::~UringFileIo() = default;

UringFileIo::RingPtr UringFileIo::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!use_ring_) return nullptr;
    if (!pool_.empty()) {
      RingPtr r = std::move(pool_.back());
      pool_.pop_back();
      return r;
    }
  }
  auto* raw = new io_uring;
  int rc = io_uring_queue_init(kQueueDepth, raw, 0);
  if (rc < 0) {
    delete raw;
    std::lock_guard<std::mutex> lock(mu_);
    // Only give up on io_uring when no ring ever worked; a failure after
    // rings exist (e.g. fd limit) is transient: use the fallback this time.
    if (pool_.empty() && !warned_) {
      std::fprintf(stderr,
                   "stripefs chunk store %s: io_uring setup failed (%s); "
                   "using pread/pwrite for chunk data instead\n",
                   owner_.c_str(), std::strerror(-rc));
      warned_ = true;
      use_ring_ = false;
    }
    return nullptr;
  }
  return RingPtr(raw);
}

void UringFileIo::Release(RingPtr ring) {
  std::lock_guard<std::mutex> lock(mu_);
  pool_.push_back(std::move(ring));
}

int UringFileIo::SubmitOne(io_uring* ring, bool* ring_broken) {
  int rc;
  do {
    rc = io_uring_submit(ring);
  } while (rc == -EINTR);
  if (rc != 1) {
    *ring_broken = true;
    return rc < 0 ? rc : -EIO;
  }
  io_uring_cqe* cqe = nullptr;
  rc = WaitCqe(ring, &cqe);
  if (rc < 0) {
    *ring_broken = true;
    return rc;
  }
  int res = cqe->res;
  io_uring_cqe_seen(ring, cqe);
  return res;
}

Result<size_t> UringFileIo::Transfer(Direction dir, int fd, uint8_t* buf,
                                     size_t len, uint64_t offset) {
  const bool writing = dir == Direction::kWrite;
  RingPtr ring = Acquire();
  bool broken = false;
  // Returns the ring to the pool unless it is gone or unusable.
  auto give_back = [&] {
    if (ring && !broken) Release(std::move(ring));
  };
  size_t done = 0;
  while (done < len) {
    size_t n = len - done < kMaxOp ? len - done : kMaxOp;
    ssize_t moved;
    if (ring && !broken) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
      if (writing) {
        io_uring_prep_write(sqe, fd, buf + done, static_cast<unsigned>(n),
                            offset + done);
      } else {
        io_uring_prep_read(sqe, fd, buf + done, static_cast<unsigned>(n),
                           offset + done);
      }
      submissions_.fetch_add(1, std::memory_order_relaxed);
      moved = SubmitOne(ring.get(), &broken);
      if (moved == -EINTR || moved == -EAGAIN) continue;
      if (moved < 0) {
        give_back();
        return Status::FromErrno(static_cast<int>(-moved),
                                 writing ? "write" : "read");
      }
    } else {
      moved =
          writing
              ? ::pwrite(fd, buf + done, n, static_cast<off_t>(offset + done))
              : ::pread(fd, buf + done, n, static_cast<off_t>(offset + done));
      if (moved < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        give_back();
        return Status::FromErrno(err, writing ? "pwrite" : "pread");
      }
    }
    if (moved == 0) {
      if (!writing) break;  // end of file
      give_back();
      return Status::IoError("write made no progress");
    }
    done += static_cast<size_t>(moved);
  }
  give_back();
  return done;
}

Result<size_t> UringFileIo::Read(int fd, uint8_t* buf, size_t len,
                                 uint64_t offset) {
  return Transfer(Direction::kRead, fd, buf, len, offset);
}

Result<size_t> UringFileIo::ReadIfCached(int fd, uint8_t* buf, size_t len,
                                         uint64_t offset) {
  size_t done = 0;
  while (done < len) {
    iovec iov{buf + done, std::min(len - done, kMaxOp)};
    const ssize_t n =
        ::preadv2(fd, &iov, 1, static_cast<off_t>(offset + done), RWF_NOWAIT);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      // EAGAIN: not (all) in the page cache. EOPNOTSUPP: the file system
      // or kernel cannot do RWF_NOWAIT; the caller reads the usual way.
      if (err == EAGAIN || err == EOPNOTSUPP) {
        return Status::WouldBlock("read of " + std::to_string(len - done) +
                                  " bytes is not in the page cache");
      }
      return Status::FromErrno(err, "preadv2(RWF_NOWAIT)");
    }
    if (n == 0) break;  // end of file
    // A short read: the rest may not be cached; the next call says so.
    done += static_cast<size_t>(n);
  }
  return done;
}

Status UringFileIo::Write(int fd, const uint8_t* buf, size_t len,
                          uint64_t offset) {
  // Transfer only reads from `buf` when writing.
  Result<size_t> r =
      Transfer(Direction::kWrite, fd, const_cast<uint8_t*>(buf), len, offset);
  if (!r.ok()) return r.status();
  return Status::Ok();
}

namespace {

// Runs `b` one at a time (Read or Write), from `done` bytes on.
void FinishOne(UringFileIo* io, UringFileIo::BatchIo& b, size_t done) {
  if (b.write) {
    Status st = io->Write(b.fd, b.buf + done, b.len - done, b.offset + done);
    b.got = st.ok() ? Result<size_t>(b.len) : Result<size_t>(st);
    return;
  }
  Result<size_t> more =
      io->Read(b.fd, b.buf + done, b.len - done, b.offset + done);
  b.got = more.ok() ? Result<size_t>(done + *more) : more;
}

}  // namespace

void UringFileIo::RunBatch(std::span<BatchIo> ios) {
  RingPtr ring = ios.size() > 1 ? Acquire() : nullptr;
  size_t at = 0;
  while (ring && at < ios.size()) {
    io_uring* r = ring.get();
    const size_t wave = std::min(ios.size() - at, size_t{kBatchDepth});
    size_t queued = 0;
    for (size_t i = at; i < at + wave; ++i) {
      BatchIo& b = ios[i];
      if (b.len == 0 || b.len > kMaxOp) continue;  // FinishOne does those
      io_uring_sqe* sqe = io_uring_get_sqe(r);
      if (b.write) {
        io_uring_prep_write(sqe, b.fd, b.buf, static_cast<unsigned>(b.len),
                            b.offset);
      } else {
        io_uring_prep_read(sqe, b.fd, b.buf, static_cast<unsigned>(b.len),
                           b.offset);
      }
      io_uring_sqe_set_data64(sqe, i);
      ++queued;
    }
    int rc = 0;
    if (queued > 0) {
      submissions_.fetch_add(1, std::memory_order_relaxed);
      do {
        rc = io_uring_submit_and_wait(r, static_cast<unsigned>(queued));
      } while (rc == -EINTR);
    }
    if (rc < 0 || static_cast<size_t>(rc) != queued) {
      // Ring state unknown: drop it; this wave and the rest go one by one
      // (transfers are idempotent).
      ring.reset();
      break;
    }
    for (size_t seen = 0; seen < queued; ++seen) {
      io_uring_cqe* cqe = nullptr;
      rc = WaitCqe(r, &cqe);
      if (rc < 0) {
        ring.reset();  // completions still owed: never reuse this ring
        break;
      }
      BatchIo& b = ios[io_uring_cqe_get_data64(cqe)];
      const int res = cqe->res;
      io_uring_cqe_seen(r, cqe);
      if (res < 0 && res != -EINTR && res != -EAGAIN) {
        b.got = Status::FromErrno(-res, b.write ? "write" : "read");
      } else if (res >= 0 && static_cast<size_t>(res) == b.len) {
        b.got = b.len;
      } else if (res == 0 && !b.write) {
        b.got = size_t{0};  // end of file
      } else {
        // Short or interrupted: the rest the one-at-a-time way.
        FinishOne(this, b, res > 0 ? static_cast<size_t>(res) : 0);
      }
    }
    if (!ring) break;
    for (size_t i = at; i < at + wave; ++i) {
      if (ios[i].len == 0 || ios[i].len > kMaxOp) FinishOne(this, ios[i], 0);
    }
    at += wave;
  }
  if (ring) Release(std::move(ring));
  // Without a ring (one transfer, no io_uring, or a broken ring): one by
  // one from where the rings stopped.
  for (size_t i = at; i < ios.size(); ++i) FinishOne(this, ios[i], 0);
}

Status UringFileIo::DataSync(int fd) {
  RingPtr ring = Acquire();
  if (ring) {
    bool broken = false;
    int rc;
    do {
      io_uring_sqe* sqe = io_uring_get_sqe(ring.get());
      io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
      rc = SubmitOne(ring.get(), &broken);
    } while (rc == -EINTR && !broken);
    if (!broken) Release(std::move(ring));
    if (rc < 0) return Status::FromErrno(-rc, "fdatasync");
    return Status::Ok();
  }
  if (::fdatasync(fd) != 0) return Status::FromErrno(errno, "fdatasync");
  return Status::Ok();
}

Status UringFileIo::WriteAndSync(int fd, const uint8_t* buf, size_t len) {
  RingPtr ring = (len > 0 && len <= kMaxOp) ? Acquire() : nullptr;
  if (!ring) {
    STRIPEFS_RETURN_IF_ERROR(Write(fd, buf, len, 0));
    return DataSync(fd);
  }
  io_uring* r = ring.get();
  io_uring_sqe* w = io_uring_get_sqe(r);
  io_uring_prep_write(w, fd, buf, static_cast<unsigned>(len), 0);
  w->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data64(w, 1);
  io_uring_sqe* f = io_uring_get_sqe(r);
  io_uring_prep_fsync(f, fd, IORING_FSYNC_DATASYNC);
  io_uring_sqe_set_data64(f, 2);
  int rc;
  do {
    rc = io_uring_submit(r);
  } while (rc == -EINTR);
  if (rc != 2) {
    // Ring state unknown: drop it and do it the plain way.
    ring.reset();
    STRIPEFS_RETURN_IF_ERROR(Write(fd, buf, len, 0));
    return DataSync(fd);
  }
  int write_res = -EIO, sync_res = -EIO;
  for (int i = 0; i < 2; ++i) {
    io_uring_cqe* cqe = nullptr;
    rc = WaitCqe(r, &cqe);
    if (rc < 0) {
      ring.reset();  // completions still owed: never reuse this ring
      return Status::FromErrno(-rc, "io_uring wait");
    }
    if (io_uring_cqe_get_data64(cqe) == 1) {
      write_res = cqe->res;
    } else {
      sync_res = cqe->res;
    }
    io_uring_cqe_seen(r, cqe);
  }
  Release(std::move(ring));
  if (write_res < 0) return Status::FromErrno(-write_res, "write");
  if (static_cast<size_t>(write_res) < len) {
    // Short write: the linked fdatasync was cancelled; finish plainly.
    size_t done = static_cast<size_t>(write_res);
    STRIPEFS_RETURN_IF_ERROR(Write(fd, buf + done, len - done, done));
    return DataSync(fd);
  }
  if (sync_res < 0) return Status::FromErrno(-sync_res, "fdatasync");
  return Status::Ok();
}

}  // namespace stripefs

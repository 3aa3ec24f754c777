// Where the stripes of one WriteMany wave meet (StripeWriteExecutor::Wave):
// once to read the old windows of their deltas (one ReadChunkRanges call
// per chunk server) and once to send their chunk writes (one ApplyChunkOps
// call per chunk server, so each server's group commit covers the wave).
//
// WaveRendezvous<Item> is the meeting itself: each member (one stripe, on
// its own thread) hands in its items (Hand) or says it has none (Leave);
// the last member to arrive runs `run_` over all of them at once, and every
// member gets its own items' statuses back. Each member arrives at most
// once; a member that hands in items again later (after the meeting) runs
// them on its own.
//
// Ownership: a Wave lives on WriteMany's stack for one wave; it borrows the
// fanout and reader. Thread-safety: Hand and Leave from the members'
// threads; the members' state is guarded by mu_ (checked by clang's
// -Wthread-safety); run_ runs without it. Internal to stripe_write*.cc.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "backend/client/chunk_fanout.h"
#include "backend/client/stripe_read.h"
#include "backend/client/stripe_write.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs {

template <typename Item>
class WaveRendezvous {
 public:
  using Runner = std::function<std::vector<Status>(std::span<const Item>)>;
  WaveRendezvous(Runner run, size_t members)
      : run_(std::move(run)), waiting_(members), arrived_(members, 0) {}

  std::vector<Status> Hand(size_t member, std::span<const Item> items)
      STRIPEFS_EXCLUDES(mu_) {
    bool after_meeting = false;
    size_t first = 0;
    {
      MutexLock lock(&mu_);
      after_meeting = arrived_[member] != 0;
      if (!after_meeting) {
        first = items_.size();
        items_.insert(items_.end(), items.begin(), items.end());
      }
    }
    if (after_meeting) return run_(items);
    Arrive(member);
    // results_ is final once Arrive returns (done_ set).
    return std::vector<Status>(
        results_.begin() + static_cast<ptrdiff_t>(first),
        results_.begin() + static_cast<ptrdiff_t>(first + items.size()));
  }
  void Leave(size_t member) STRIPEFS_EXCLUDES(mu_) { Arrive(member); }

 private:
  // Counts `member` in (once); the last one runs the wave without the
  // lock, the others wait for it.
  void Arrive(size_t member) STRIPEFS_EXCLUDES(mu_) {
    UniqueMutexLock lock(&mu_);
    if (arrived_[member]) return;
    arrived_[member] = 1;
    if (--waiting_ != 0) {
      cv_.wait(lock.native(), [&] {
        mu_.AssertHeld();
        return done_;
      });
      return;
    }
    // Everyone is in: the items are this member's to run.
    const std::vector<Item> items = std::move(items_);
    lock.Unlock();
    std::vector<Status> results = run_(items);
    results.resize(items.size(),
                   Status::IoError("wave ran fewer items than handed in"));
    lock.Lock();
    results_ = std::move(results);
    done_ = true;
    cv_.notify_all();
  }

  const Runner run_;
  Mutex mu_;
  std::condition_variable cv_;
  size_t waiting_ STRIPEFS_GUARDED_BY(mu_);
  std::vector<char> arrived_ STRIPEFS_GUARDED_BY(mu_);
  std::vector<Item> items_ STRIPEFS_GUARDED_BY(mu_);
  // Set once, under mu_, before done_; read by members after done_.
  std::vector<Status> results_;
  bool done_ STRIPEFS_GUARDED_BY(mu_) = false;
};

struct StripeWriteExecutor::Wave {
  Wave(ChunkFanout* fanout, StripeReader* reader, size_t members)
      : reads(
            [fanout, reader](std::span<const ChunkFanout::BatchRead> items) {
              return fanout->ReadBatch(items, reader->DirectDeadline());
            },
            members),
        writes(
            [fanout](std::span<const ChunkFanout::BatchOp> items) {
              return fanout->RunBatch(items);
            },
            members) {}
  void Leave(size_t member) {
    reads.Leave(member);
    writes.Leave(member);
  }
  // Hands `items` to the write batch, having left the reads first: a
  // member still expected at the reads would wait there for this one
  // forever.
  std::vector<Status> Write(size_t member,
                            std::span<const ChunkFanout::BatchOp> items) {
    reads.Leave(member);
    return writes.Hand(member, items);
  }
  WaveRendezvous<ChunkFanout::BatchRead> reads;
  WaveRendezvous<ChunkFanout::BatchOp> writes;
};

}  // namespace stripefs

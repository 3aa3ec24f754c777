// InodeLease: the block of inode numbers one MetaStore hands out.
//
// A block is leased by one transaction on M next_inode, the counter every
// MetaStore of the volume shares, so creates on different metads write no
// shared record; a crash or close leaks at most the rest of one block.
//
// Ownership: borrows the KvStore, which must outlive it.
// Thread-safety: thread-compatible; MetaStore keeps it GUARDED_BY its mu_.
// Durability: a lease needs no wait of its own: it is committed before any
// mutation that uses a number from it, and the WAL (RocksDB) or Raft (etcd)
// keeps that order.
#pragma once

#include <atomic>
#include <cstdint>

#include "backend/meta/kv_store.h"
#include "common/status.h"

namespace stripefs {

class InodeLease {
 public:
  // `batch`: numbers leased per transaction (at least 1).
  InodeLease(KvStore* kv, uint32_t batch);

  // The next number, leasing a new block when this one is used up;
  // `conflicts` counts leases re-run after losing to another MetaStore's.
  // EOVERFLOW when the volume's numbers are exhausted.
  Result<uint64_t> Take(std::atomic<uint64_t>* conflicts);
  // Gives back `ino` if it is the number Take returned last, so a mutation
  // that did not commit leaves no gap (its re-run takes the same number).
  void GiveBack(uint64_t ino);

 private:
  KvStore* const kv_;
  const uint64_t batch_;
  uint64_t next_ = 0;   // [next_, limit_) leased and not handed out
  uint64_t limit_ = 0;  // 0: no block leased yet
};

}  // namespace stripefs

// StripeLocks: a fixed set of mutexes, one chosen per (inode, stripe), that
// serialises the writes, repairs and deletions one client makes to a stripe.
// Writers in different clients are serialised by the commit CAS instead.
//
// Two stripes may share a mutex: code holding several locks takes them with
// LockAll (sorted, deduplicated), never one by one. Thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/client/placement.h"

namespace stripefs {

class StripeLocks {
 public:
  std::mutex& For(uint64_t ino, uint64_t stripe) {
    return mu_[Index(ino, stripe)];
  }

  // Holds the locks of every stripe in `stripes` of `ino` until destroyed.
  class Group {
   public:
    Group(StripeLocks* locks, uint64_t ino,
          const std::vector<uint64_t>& stripes) {
      std::vector<size_t> idx;
      for (uint64_t s : stripes) idx.push_back(Index(ino, s));
      std::sort(idx.begin(), idx.end());
      idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
      for (size_t i : idx) held_.emplace_back(locks->mu_[i]);
    }

   private:
    std::vector<std::unique_lock<std::mutex>> held_;
  };

 private:
  static constexpr size_t kLocks = 1024;
  static size_t Index(uint64_t ino, uint64_t stripe) {
    return PlacementHash(ino, stripe) % kLocks;
  }
  std::mutex mu_[kLocks];
};

}  // namespace stripefs

// BufferPool: reusable byte buffers of one size for hot write paths.
//
// A stripe write used to allocate (and zero) fresh 1 MiB vectors per stripe:
// malloc hands such sizes to mmap, so every stripe paid page faults, a
// zero-fill and an munmap. A pool keeps up to `max_idle` released buffers
// and hands them out again.
//
// Contents: a buffer from Get() holds UNSPECIFIED bytes (whatever its last
// user left, or uninitialised memory): callers must write every byte they
// later read, or zero what they need as zeros themselves.
//
// Placement: every buffer is placed so that data() + align_at is
// kBufferAlign (4 KiB) aligned (align_at = 0: data() itself is). So pooled
// stripes, cells and parity can go to O_DIRECT without a staging copy, and
// a transport can read a request so that its payload, `align_at` bytes in,
// lands on a page boundary (DevTransport: fuse_in_header + fuse_write_in).
//
// Bounds: the pool never blocks and never refuses: Get() allocates when no
// buffer is idle (callers bound how many they hold, e.g. StripeWriter's
// memory budget; outstanding() tells them how many are out). Only idle
// buffers are bounded: a release that finds `max_idle` buffers idle frees
// its buffer. So the pool holds at most max_idle * buffer_size bytes beyond
// what callers hold.
//
// Ownership: a Lease owns its buffer until destroyed (or reset), then gives
// it back. Leases share the pool's state, so a Lease may outlive the
// BufferPool object (and be handed to another owner, e.g. a FUSE request
// buffer kept by the file system after the reply). Thread-safety: all
// methods may be called concurrently; one Lease is used by one thread at a
// time.
//
// AlignedBytes: a byte vector whose data() is kBufferAlign aligned and whose
// resize() leaves new bytes uninitialised (no zero-fill): for receive
// buffers that are written whole before they are read (a frame's bulk), so
// that chunk data received into one can go to O_DIRECT without a staging
// copy. Same ownership and thread-safety as std::vector.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace stripefs {

class BufferPool {
  struct State;
  // Frees what Allocate() got (aligned operator new).
  struct AlignedDelete {
    void operator()(uint8_t* p) const {
      ::operator delete[](p, std::align_val_t{kBufferAlign});
    }
  };
  using Block = std::unique_ptr<uint8_t, AlignedDelete>;

 public:
  static constexpr size_t kBufferAlign = 4096;

  // A buffer borrowed from the pool (empty when default-constructed).
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept
        : state_(std::move(o.state_)), buf_(std::move(o.buf_)) {}
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        reset();
        state_ = std::move(o.state_);
        buf_ = std::move(o.buf_);
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }

    uint8_t* data() const { return buf_ ? buf_.get() + state_->lead : nullptr; }
    size_t size() const { return buf_ ? state_->size : 0; }
    bool empty() const { return !buf_; }
    std::span<uint8_t> span() const { return {data(), size()}; }
    // Gives the buffer back now.
    void reset() {
      if (buf_) state_->Put(std::move(buf_));
      state_.reset();
    }

   private:
    friend class BufferPool;
    Lease(std::shared_ptr<State> s, Block b)
        : state_(std::move(s)), buf_(std::move(b)) {}
    std::shared_ptr<State> state_;
    Block buf_;  // the aligned block; data() is `lead` bytes into it
  };

  // `align_at` < kBufferAlign: the offset into each buffer that is
  // kBufferAlign aligned (see Placement above).
  BufferPool(size_t buffer_size, size_t max_idle, size_t align_at = 0)
      : state_(std::make_shared<State>(buffer_size, max_idle,
                                       align_at % kBufferAlign)) {}

  // A buffer of buffer_size() bytes, contents unspecified. Never blocks.
  Lease Get() {
    Block b = state_->Take();
    if (!b) {
      // Default-init: no zeroing.
      b.reset(new (std::align_val_t{kBufferAlign})
                  uint8_t[state_->lead + state_->size]);
    }
    return Lease(state_, std::move(b));
  }

  size_t buffer_size() const { return state_->size; }
  size_t max_idle() const { return state_->max_idle; }
  size_t align_at() const {
    return (kBufferAlign - state_->lead) % kBufferAlign;
  }
  // Buffers handed out by Get() and not given back yet.
  size_t outstanding() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->out;
  }
  size_t idle() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->idle.size();
  }
  // Get() calls served by an idle buffer / by a new allocation.
  uint64_t reuses() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->reuses;
  }
  uint64_t allocations() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->allocations;
  }

 private:
  struct State {
    State(size_t s, size_t m, size_t align_at)
        : size(s),
          max_idle(m),
          lead((kBufferAlign - align_at) % kBufferAlign) {}
    Block Take() {
      std::lock_guard<std::mutex> lock(mu);
      ++out;
      if (idle.empty()) {
        ++allocations;
        return nullptr;
      }
      ++reuses;
      auto b = std::move(idle.back());
      idle.pop_back();
      return b;
    }
    void Put(Block b) {
      {
        std::lock_guard<std::mutex> lock(mu);
        --out;
        if (idle.size() < max_idle) {
          idle.push_back(std::move(b));
          return;
        }
      }
      b.reset();  // over the idle bound: freed, outside the lock
    }
    const size_t size;
    const size_t max_idle;
    const size_t lead;  // bytes before data() in each block
    mutable std::mutex mu;
    std::vector<Block> idle;   // guarded by mu
    size_t out = 0;            // guarded by mu
    uint64_t reuses = 0;       // guarded by mu
    uint64_t allocations = 0;  // guarded by mu
  };
  std::shared_ptr<State> state_;
};

// Allocator of AlignedBytes (see the top of this file).
template <class T>
struct PageAlignedAllocator {
  using value_type = T;
  PageAlignedAllocator() = default;
  template <class U>
  PageAlignedAllocator(const PageAlignedAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (
        n * sizeof(T), std::align_val_t{BufferPool::kBufferAlign}));
  }
  void deallocate(T* p, size_t) noexcept {
    ::operator delete (p, std::align_val_t{BufferPool::kBufferAlign});
  }
  // resize(): default-initialise (bytes: leave them as they are).
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  template <class U>
  bool operator==(const PageAlignedAllocator<U>&) const noexcept {
    return true;
  }
};
using AlignedBytes = std::vector<uint8_t, PageAlignedAllocator<uint8_t>>;
// Same bytes as a plain vector (tests compare received frames with what
// was sent).
inline bool operator==(const AlignedBytes& a, const std::vector<uint8_t>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace stripefs

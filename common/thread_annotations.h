// Clang thread-safety annotations (-Wthread-safety): lock rules the
// compiler checks instead of "guarded by" prose, as in LevelDB's
// port/thread_annotations.h and Abseil's. Prefixed STRIPEFS_ because Abseil
// (pulled in by gRPC and protobuf headers) still defines the unprefixed
// GUARDED_BY & co. Under GCC they expand to nothing.
//
// libstdc++'s std::mutex carries no capability attribute, so annotated
// code locks a stripefs::Mutex (a std::mutex with the attributes) through
// MutexLock (scoped, like std::lock_guard) or UniqueMutexLock (unlockable,
// for condition variables through native()):
//
//   Mutex mu_;
//   int n_ STRIPEFS_GUARDED_BY(mu_) = 0;
//   void Bump() STRIPEFS_EXCLUDES(mu_) { MutexLock l(&mu_); ++n_; }
//   void BumpLocked() STRIPEFS_REQUIRES(mu_) { ++n_; }
//
// A condition variable waits on the std::unique_lock a UniqueMutexLock
// holds (cv.wait(lock.native(), pred)); the analysis treats the lock as
// held throughout, which is what the wait guarantees on return. A wait
// predicate is a lambda, which the analysis checks on its own: it starts
// with mu_.AssertHeld().
//
// Thread-safety: Mutex is a std::mutex. Limits: the analysis is
// intra-procedural and cannot name a lock it does not see (a lock picked
// at run time, such as the chunk store's striped chunk locks, or another
// object's mutex); such rules stay prose.
#pragma once

#include <mutex>

#if defined(__clang__)
#define STRIPEFS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STRIPEFS_THREAD_ANNOTATION(x)
#endif

#define STRIPEFS_CAPABILITY(x) STRIPEFS_THREAD_ANNOTATION(capability(x))
#define STRIPEFS_SCOPED_CAPABILITY STRIPEFS_THREAD_ANNOTATION(scoped_lockable)
#define STRIPEFS_GUARDED_BY(x) STRIPEFS_THREAD_ANNOTATION(guarded_by(x))
#define STRIPEFS_PT_GUARDED_BY(x) STRIPEFS_THREAD_ANNOTATION(pt_guarded_by(x))
#define STRIPEFS_ACQUIRED_BEFORE(...) \
  STRIPEFS_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define STRIPEFS_ACQUIRED_AFTER(...) \
  STRIPEFS_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define STRIPEFS_REQUIRES(...) \
  STRIPEFS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define STRIPEFS_REQUIRES_SHARED(...) \
  STRIPEFS_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define STRIPEFS_ACQUIRE(...) \
  STRIPEFS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define STRIPEFS_RELEASE(...) \
  STRIPEFS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define STRIPEFS_TRY_ACQUIRE(...) \
  STRIPEFS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define STRIPEFS_EXCLUDES(...) \
  STRIPEFS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define STRIPEFS_ASSERT_CAPABILITY(x) \
  STRIPEFS_THREAD_ANNOTATION(assert_capability(x))
#define STRIPEFS_RETURN_CAPABILITY(x) \
  STRIPEFS_THREAD_ANNOTATION(lock_returned(x))
#define STRIPEFS_NO_THREAD_SAFETY_ANALYSIS \
  STRIPEFS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace stripefs {

// A std::mutex the analysis knows as a capability.
class STRIPEFS_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() STRIPEFS_ACQUIRE() { mu_.lock(); }
  void unlock() STRIPEFS_RELEASE() { mu_.unlock(); }
  bool try_lock() STRIPEFS_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds it (checked by nothing at run
  // time): for code the analysis cannot follow, e.g. a wait predicate.
  void AssertHeld() const STRIPEFS_ASSERT_CAPABILITY(this) {}
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// std::lock_guard for a Mutex.
class STRIPEFS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) STRIPEFS_ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() STRIPEFS_RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// std::unique_lock for a Mutex, for condition variables: native() is the
// std::unique_lock<std::mutex> to wait on.
class STRIPEFS_SCOPED_CAPABILITY UniqueMutexLock {
 public:
  explicit UniqueMutexLock(Mutex* mu) STRIPEFS_ACQUIRE(mu)
      : lock_(mu->native()) {}
  ~UniqueMutexLock() STRIPEFS_RELEASE() {}
  UniqueMutexLock(const UniqueMutexLock&) = delete;
  UniqueMutexLock& operator=(const UniqueMutexLock&) = delete;

  void Unlock() STRIPEFS_RELEASE() { lock_.unlock(); }
  void Lock() STRIPEFS_ACQUIRE() { lock_.lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace stripefs

// MemFs: a small in-memory file system for testing the FUSE engine (test
// code, not product). Implements enough of RawFileSystem for POSIX checks
// through the kernel: files, dirs, symlinks, hard links, rename flags,
// setattr, xattrs, statfs, readdir(plus), fallocate(mode 0), lseek, and
// the killpriv v2 flags (raw_file_system.h).
//
// With async=true, READ/WRITE/GETATTR replies are completed on a separate
// worker thread (exercises asynchronous completion). One mutex guards the
// tree; thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fuse/raw_file_system.h"
#include "fuse/session_info.h"

namespace stripefs::fuse::testing {

class MemFs : public RawFileSystem {
 public:
  explicit MemFs(bool async = false);
  ~MemFs() override;

  void Init(const NegotiatedInit& n) override;
  void Destroy() override { destroyed_ = true; }
  void Lookup(Replier r, uint64_t parent, std::string_view name) override;
  void Forget(uint64_t nodeid, uint64_t nlookup) override;
  void GetAttr(Replier r, uint64_t nodeid,
               const fuse_abi::fuse_getattr_in& in) override;
  void SetAttr(Replier r, uint64_t nodeid,
               const fuse_abi::fuse_setattr_in& in) override;
  void ReadLink(Replier r, uint64_t nodeid) override;
  void Symlink(Replier r, uint64_t parent, std::string_view name,
               std::string_view target) override;
  void Mknod(Replier r, uint64_t parent, std::string_view name,
             const fuse_abi::fuse_mknod_in& in) override;
  void Mkdir(Replier r, uint64_t parent, std::string_view name,
             const fuse_abi::fuse_mkdir_in& in) override;
  void Unlink(Replier r, uint64_t parent, std::string_view name) override;
  void Rmdir(Replier r, uint64_t parent, std::string_view name) override;
  void Rename(Replier r, uint64_t olddir, std::string_view oldname,
              uint64_t newdir, std::string_view newname,
              uint32_t flags) override;
  void Link(Replier r, uint64_t oldnode, uint64_t newparent,
            std::string_view newname) override;
  void Open(Replier r, uint64_t nodeid,
            const fuse_abi::fuse_open_in& in) override;
  void Read(Replier r, uint64_t nodeid,
            const fuse_abi::fuse_read_in& in) override;
  void Write(Replier r, uint64_t nodeid, const WriteRequest& w) override;
  void StatFs(Replier r, uint64_t nodeid) override;
  void Release(Replier r, uint64_t, const fuse_abi::fuse_release_in&) override {
    r.Ok();
  }
  void Fsync(Replier r, uint64_t, const fuse_abi::fuse_fsync_in&) override {
    fsyncs_++;
    r.Ok();
  }
  void Flush(Replier r, uint64_t, const fuse_abi::fuse_flush_in&) override {
    r.Ok();
  }
  void SetXattr(Replier r, uint64_t nodeid, std::string_view name,
                std::span<const uint8_t> value,
                const fuse_abi::fuse_setxattr_in& in) override;
  void GetXattr(Replier r, uint64_t nodeid, std::string_view name,
                uint32_t size) override;
  void ListXattr(Replier r, uint64_t nodeid, uint32_t size) override;
  void RemoveXattr(Replier r, uint64_t nodeid, std::string_view name) override;
  void OpenDir(Replier r, uint64_t nodeid,
               const fuse_abi::fuse_open_in& in) override;
  void ReadDir(Replier r, uint64_t nodeid,
               const fuse_abi::fuse_read_in& in) override;
  void ReadDirPlus(Replier r, uint64_t nodeid,
                   const fuse_abi::fuse_read_in& in) override;
  void ReleaseDir(Replier r, uint64_t,
                  const fuse_abi::fuse_release_in&) override {
    r.Ok();
  }
  void FsyncDir(Replier r, uint64_t, const fuse_abi::fuse_fsync_in&) override {
    r.Ok();
  }
  void Access(Replier r, uint64_t, uint32_t) override { r.Ok(); }
  void Create(Replier r, uint64_t parent, std::string_view name,
              const fuse_abi::fuse_create_in& in) override;
  void Fallocate(Replier r, uint64_t nodeid,
                 const fuse_abi::fuse_fallocate_in& in) override;
  void Lseek(Replier r, uint64_t nodeid,
             const fuse_abi::fuse_lseek_in& in) override;

  // Test hooks: replace a file's content behind the kernel's back.
  void SetContentForTest(uint64_t ino, const std::string& content);
  uint32_t max_write_size() const { return max_write_size_; }

  // Test observation.
  bool inited() const { return inited_; }
  bool destroyed() const { return destroyed_; }
  NegotiatedInit negotiated() const;
  uint64_t writes() const { return writes_; }
  uint64_t writeback_writes() const { return writeback_writes_; }
  // WRITEs whose data started on a 4 KiB boundary of the transport buffer.
  uint64_t page_aligned_writes() const { return page_aligned_writes_; }
  uint64_t fsyncs() const { return fsyncs_; }
  uint64_t readdirplus_calls() const { return readdirplus_; }

 private:
  struct Node {
    uint64_t ino = 0;
    uint32_t mode = 0;
    uint32_t uid = 0, gid = 0;
    uint32_t nlink = 1;
    uint32_t rdev = 0;
    uint64_t atime = 0, mtime = 0, ctime = 0;
    uint32_t atimensec = 0, mtimensec = 0, ctimensec = 0;
    std::vector<uint8_t> data;
    std::string target;
    std::map<std::string, uint64_t> children;
    std::map<std::string, std::vector<uint8_t>> xattrs;
  };
  Node* Get(uint64_t ino);
  // FUSE_HANDLE_KILLPRIV_V2: drop suid/sgid and file capabilities (mu_).
  static void KillPrivLocked(Node* n);
  fuse_abi::fuse_attr AttrOf(const Node& n) const;
  fuse_abi::fuse_entry_out EntryOf(const Node& n) const;
  Node* NewNode(uint32_t mode, uint32_t uid, uint32_t gid);
  // Creates name in parent; replies the entry or the error.
  void MakeNode(Replier r, uint64_t parent, std::string_view name,
                uint32_t mode, std::string_view target);
  void DoReadDir(Replier r, uint64_t nodeid, const fuse_abi::fuse_read_in& in,
                 bool plus);
  void RunMaybeAsync(std::function<void()> fn);  // fn owns its Replier

  mutable std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Node>> nodes_;
  uint64_t next_ino_ = 2;
  NegotiatedInit neg_;
  std::atomic<bool> inited_{false}, destroyed_{false};
  std::atomic<uint32_t> max_write_size_{0};
  std::atomic<uint64_t> writes_{0}, writeback_writes_{0}, fsyncs_{0},
      readdirplus_{0}, page_aligned_writes_{0};

  bool async_;
  std::mutex qmu_;
  std::condition_variable qcv_;
  std::deque<std::function<void()>> queue_;
  bool quit_ = false;
  std::thread worker_;
};

}  // namespace stripefs::fuse::testing

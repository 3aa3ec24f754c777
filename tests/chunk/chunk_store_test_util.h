// Helpers shared by the chunk store tests: a temporary directory that is
// removed afterwards, a fixture with a store on a small tmpfs, deterministic
// chunk payloads, and file bit flipping.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/chunk/chunk_store.h"
#include "tests/chunk/chunk_payload.h"

namespace stripefs::testing {

// mkdtemp directory under $TMPDIR (or /tmp), removed recursively on
// destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/chunkstore-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) std::abort();
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A store on a tmpfs (or another memory file system, e.g. ramfs) the test
// mounts (root; skipped loudly otherwise) and always unmounts:
// Mount("size=4m") from SetUp or the test body (then check IsSkipped()), open
// the store under mnt_.
class TmpfsStoreTest : public ::testing::Test {
 protected:
  void Mount(const char* opts, const char* fstype = "tmpfs") {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "SKIPPED LOUDLY: needs root to mount a " << fstype << " ("
                   << opts << ")";
    }
    mnt_ = dir_.path() + "/mnt";
    std::filesystem::create_directories(mnt_);
    if (::mount(fstype, mnt_.c_str(), fstype, 0, opts) != 0) {
      int err = errno;
      GTEST_SKIP() << "SKIPPED LOUDLY: cannot mount " << fstype << " on "
                   << mnt_ << ": " << std::strerror(err);
    }
    mounted_ = true;
  }
  void TearDown() override {
    store_.reset();
    if (mounted_) {
      EXPECT_EQ(::umount2(mnt_.c_str(), MNT_DETACH), 0)
          << "could not unmount " << mnt_ << ": " << std::strerror(errno);
    }
  }
  TempDir dir_;
  std::string mnt_;
  bool mounted_ = false;
  std::unique_ptr<ChunkStore> store_;
};

// XORs `mask` into the byte at `offset` of `path`.
inline void FlipBits(const std::string& path, off_t offset, uint8_t mask) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
  b ^= mask;
  ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
  ::close(fd);
}

// XORs `mask` into byte `offset` of stored chunk (id, version).
inline void FlipChunkBits(ChunkStore& store, const ChunkId& id,
                          uint64_t version, uint64_t offset, uint8_t mask) {
  auto loc = store.Locate(id, version, static_cast<uint32_t>(offset));
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  FlipBits(loc->path, static_cast<off_t>(loc->offset), mask);
}

// The live bytes of all segments of `store`.
inline uint64_t LiveBytes(ChunkStore& store) {
  uint64_t n = 0;
  for (const auto& seg : store.Segments()) n += seg.usage.live_bytes;
  return n;
}

// Regular files under `dir` whose name ends with `suffix`.
inline size_t CountFiles(const std::string& dir,
                         const std::string& suffix = "") {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  }
  return n;
}

}  // namespace stripefs::testing

// Unit tests of the cluster key file: keygen, loading, and clear errors for
// missing, unreadable and wrong-size files.
#include "backend/rpc/cluster_key.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace stripefs::rpc {
namespace {

class ClusterKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs-keytest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ClusterKeyTest, GenerateMakesA32ByteOwnerOnlyFile) {
  std::string path = dir_ + "/k";
  ASSERT_TRUE(ClusterKey::Generate(path).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 32);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto k = ClusterKey::Load(path);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  // A second keygen must not overwrite the key.
  Status again = ClusterKey::Generate(path);
  EXPECT_EQ(again.code(), EEXIST);
}

TEST_F(ClusterKeyTest, TwoGeneratedKeysDiffer) {
  ASSERT_TRUE(ClusterKey::Generate(dir_ + "/a").ok());
  ASSERT_TRUE(ClusterKey::Generate(dir_ + "/b").ok());
  auto a = ClusterKey::Load(dir_ + "/a");
  auto b = ClusterKey::Load(dir_ + "/b");
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint8_t> msg{1, 2, 3};
  std::span<const uint8_t> parts[] = {msg};
  EXPECT_NE((*a)->Compute(parts), (*b)->Compute(parts));
  EXPECT_EQ((*a)->Compute(parts), (*a)->Compute(parts));
}

TEST_F(ClusterKeyTest, MissingFileNamesTheFileAndTheFix) {
  auto k = ClusterKey::Load(dir_ + "/nope");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), ENOENT);
  EXPECT_NE(k.status().message().find(dir_ + "/nope"), std::string::npos);
  EXPECT_NE(k.status().message().find("stripefs keygen"), std::string::npos);
}

TEST_F(ClusterKeyTest, WrongSizeIsRejected) {
  for (size_t n : {0, 16, 31, 33, 64}) {
    std::string path = dir_ + "/k" + std::to_string(n);
    std::ofstream(path) << std::string(n, 'x');
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
    auto k = ClusterKey::Load(path);
    ASSERT_FALSE(k.ok()) << n;
    EXPECT_EQ(k.status().code(), EINVAL);
    EXPECT_NE(k.status().message().find("stripefs keygen"), std::string::npos);
  }
}

// A key that group or others may read (or write) is refused, naming the
// file and `chmod 600` (before issue 35 it was accepted silently).
TEST_F(ClusterKeyTest, GroupOrWorldAccessibleKeyIsRefusedNamingChmod600) {
  const std::string path = dir_ + "/k";
  ASSERT_TRUE(ClusterKey::Generate(path).ok());
  for (mode_t mode : {0644, 0640, 0604, 0660, 0602, 0700 | 0020}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    auto k = ClusterKey::Load(path);
    ASSERT_FALSE(k.ok()) << std::oct << mode;
    EXPECT_EQ(k.status().code(), EPERM);
    const std::string m = k.status().message();
    EXPECT_NE(m.find("chmod 600 " + path), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  for (mode_t mode : {0600, 0400}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    EXPECT_TRUE(ClusterKey::Load(path).ok()) << std::oct << mode;
  }
}

// Load's error code for `path`, as seen by an unprivileged user: root (as in
// CI) can read a mode-000 file, so a root caller asks a forked child that has
// dropped to nobody. -1 if the privileges could not be dropped.
int LoadErrorUnprivileged(const std::string& path) {
  if (::geteuid() != 0) return ClusterKey::Load(path).status().code();
  pid_t pid = ::fork();
  if (pid == 0) {
    constexpr uid_t kNobody = 65534;
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 ||
        ::setuid(kNobody) != 0)
      ::_exit(255);
    ::_exit(ClusterKey::Load(path).status().code() & 0x7f);
  }
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
      WEXITSTATUS(st) == 255)
    return -1;
  return WEXITSTATUS(st);
}

TEST_F(ClusterKeyTest, UnreadableFileIsReported) {
  std::string path = dir_ + "/k";
  ASSERT_TRUE(ClusterKey::Generate(path).ok());
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // only the file's mode denies
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  int code = LoadErrorUnprivileged(path);
  ASSERT_NE(code, -1) << "could not drop to uid 65534 to test as non-root";
  EXPECT_EQ(code, EACCES);
}

TEST_F(ClusterKeyTest, HmacIsSha256KnownAnswerAndSplitInvariant) {
  // Expected value from `openssl dgst -sha256 -mac HMAC -macopt hexkey:0b..`
  // (32 bytes of 0x0b) over "Hi There".
  std::array<uint8_t, 32> kb;
  kb.fill(0x0b);
  auto k = ClusterKey::FromBytes(kb);
  std::string msg = "Hi There";
  std::span<const uint8_t> whole(reinterpret_cast<const uint8_t*>(msg.data()),
                                 msg.size());
  std::span<const uint8_t> split[] = {whole.subspan(0, 3), whole.subspan(3)};
  std::span<const uint8_t> one[] = {whole};
  Mac mac = k->Compute(one);
  char hex[65];
  for (size_t i = 0; i < mac.size(); ++i)
    std::snprintf(hex + 2 * i, 3, "%02x", mac[i]);
  EXPECT_STREQ(
      hex, "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7");
  EXPECT_EQ(k->Compute(split), mac);
}

}  // namespace
// Identity files (`stripefs auth add`): written 0600, loaded back with the
// same name, salt and key; the key wraps for one recipient only.
TEST_F(ClusterKeyTest, IdentityFilesRoundTripAndWrapForTheirRecipient) {
  std::array<uint8_t, kClusterKeySize> b;
  b.fill(9);
  auto server = ClusterKey::FromBytes(b);
  EXPECT_EQ(server->entity(), "server");
  EXPECT_EQ(server->principal(), Principal::kServer);
  auto alice = server->NewIdentity("client.alice");
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  EXPECT_EQ(alice->principal(), Principal::kClient);
  std::string path = dir_ + "/alice.key";
  ASSERT_TRUE(alice->SaveIdentity(path).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(alice->SaveIdentity(path).code(), EEXIST);
  auto loaded = ClusterKey::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->entity(), "client.alice");
  EXPECT_EQ((*loaded)->salt(), alice->salt());
  std::span<const uint8_t> parts[] = {std::span<const uint8_t>(b)};
  EXPECT_EQ((*loaded)->Compute(parts), alice->Compute(parts));
  EXPECT_EQ(
      server->DeriveIdentity("client.alice", alice->salt()).Compute(parts),
      alice->Compute(parts));
  // Another identity cannot make anything of the wrapped key.
  auto ops = server->NewIdentity("admin.ops");
  ASSERT_TRUE(ops.ok());
  std::vector<uint8_t> wrapped = alice->WrapFor(*ops);
  auto opened = ops->Unwrap("client.alice", alice->salt(), wrapped);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(opened->Compute(parts), alice->Compute(parts));
  auto other = server->Unwrap("client.alice", alice->salt(), wrapped);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->Compute(parts), alice->Compute(parts));
  // Names and who may derive identities.
  EXPECT_EQ(server->NewIdentity("alice").status().code(), EINVAL);
  EXPECT_EQ(server->NewIdentity("client.a/b").status().code(), EINVAL);
  EXPECT_EQ(server->NewIdentity("server").status().code(), EINVAL);
  EXPECT_EQ(alice->NewIdentity("client.bob").status().code(), EPERM);
}

}  // namespace stripefs::rpc

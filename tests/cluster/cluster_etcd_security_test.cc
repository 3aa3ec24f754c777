// etcd behind TLS and auth (issue 35, hole 1), on a real `stripefs cluster
// up --meta-engine etcd` (1 etcd member, 1 metad, 3 chunkd, 2+1): the
// volume's records in etcd cannot be read or written without the volume
// user's certificate -- not by a plaintext client, not over TLS with no
// client certificate, not with a certificate naming no etcd user, not with
// the certificate of another volume's user -- while the product works with
// its own; the credentials are private files; `cluster status` reads the
// members' Raft roles without etcdctl; plaintext etcd:// is refused unless
// --etcd-insecure, and then off loopback too.
// One cluster serves the suite (one ctest entry). Skips loudly without the
// stripefs binary or Debian's etcd/etcdctl.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>

#include "backend/client/volume.h"
#include "backend/meta/etcd_admin.h"
#include "backend/meta/etcd_pki.h"
#include "backend/meta/meta_store.h"
#include "tests/support/local_cluster.h"
#include "tests/support/run_command.h"

namespace stripefs {
namespace {

using testing::RunCommand;

class EtcdSecurityClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::LocalClusterOptions o;
    o.engine = testing::MetaEngine::kEtcd;
    o.etcd_members = 1;
    o.metads = 1;
    o.servers = 3;
    o.k = 2;
    o.m = 1;
    auto c = testing::LocalCluster::Start(o);
    if (!c.ok()) {
      start_error_ = new Status(c.status());
      return;
    }
    cluster_ = std::move(c).value().release();
  }
  static void TearDownTestSuite() {
    if (cluster_) {
      Status st = cluster_->Down();
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    delete cluster_;
    cluster_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    if (start_error_ && start_error_->code() == EOPNOTSUPP)
      GTEST_SKIP() << "etcd cluster: " << start_error_->message();
    ASSERT_NE(cluster_, nullptr) << start_error_->ToString();
  }

  static std::string Dir() { return cluster_->dir(); }
  static std::string Tls() { return Dir() + "/etcd-tls"; }
  static std::string Endpoint() {
    std::string a = cluster_->ReadFile("etcd.1.addr");
    return a.substr(0, a.find('\n'));
  }
  // etcdctl against the member with `flags` (certificates); rc and output.
  static testing::CommandOutput Etcdctl(const std::string& flags,
                                        const std::string& args) {
    return RunCommand("ETCDCTL_API=3 /usr/bin/etcdctl --endpoints=" + flags +
                      " --dial-timeout=2s --command-timeout=3s " + args +
                      " 2>&1");
  }
  static std::string Tls(const std::string& user) {
    return "https://" + Endpoint() + " --cacert " + Tls() + "/ca.crt --cert " +
           Tls() + "/" + user + ".crt --key " + Tls() + "/" + user + ".key";
  }
  static std::string VolumeCreds() { return Tls("volume-stripefs"); }
  // A certificate from the cluster's CA for `user` (made once).
  static void Mint(const std::string& user) {
    auto pki = EtcdPki::OpenOrCreate(Tls());
    ASSERT_TRUE(pki.ok()) << pki.status().ToString();
    ASSERT_TRUE(pki->Issue(user, user).ok());
  }
  static EtcdAdminTarget Root() {
    return {{Endpoint()},
            {Tls() + "/ca.crt", Tls() + "/root.crt", Tls() + "/root.key"},
            std::chrono::milliseconds(5000)};
  }

  static testing::LocalCluster* cluster_;
  static Status* start_error_;
};
testing::LocalCluster* EtcdSecurityClusterTest::cluster_ = nullptr;
Status* EtcdSecurityClusterTest::start_error_ = nullptr;

TEST_F(EtcdSecurityClusterTest, VolumeUserReadsItsPrefixAndTheProductWorks) {
  auto v = Volume::ConnectCluster(cluster_->meta_address(),
                                  cluster_->key_file(), {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE((*v)->meta().MkNode(kRootInode, "f", 0100644, 0, 0, 0).ok());
  auto out = Etcdctl(VolumeCreds(), "get --prefix --keys-only stripefs/");
  EXPECT_EQ(out.rc, 0) << out.out;
  EXPECT_NE(out.out.find("stripefs/"), std::string::npos) << out.out;
}

TEST_F(EtcdSecurityClusterTest, PlaintextClientGetsNothing) {
  auto out = Etcdctl("http://" + Endpoint(), "get --prefix stripefs/");
  EXPECT_NE(out.rc, 0) << out.out;
  out = Etcdctl("http://" + Endpoint(), "put stripefs/x intruder");
  EXPECT_NE(out.rc, 0) << out.out;
}

TEST_F(EtcdSecurityClusterTest, TlsWithoutClientCertificateGetsNothing) {
  auto out = Etcdctl("https://" + Endpoint() + " --cacert " + Tls() + "/ca.crt",
                     "get --prefix stripefs/");
  EXPECT_NE(out.rc, 0) << out.out;
}

TEST_F(EtcdSecurityClusterTest, CertificateOfNoUserIsDenied) {
  ASSERT_NO_FATAL_FAILURE(Mint("nobody"));
  auto out = Etcdctl(Tls("nobody"), "get --prefix stripefs/");
  EXPECT_NE(out.rc, 0) << out.out;
  EXPECT_NE(out.out.find("permission denied"), std::string::npos) << out.out;
  out = Etcdctl(Tls("nobody"), "put stripefs/x intruder");
  EXPECT_NE(out.rc, 0) << out.out;
}

TEST_F(EtcdSecurityClusterTest, AnotherVolumesUserIsDenied) {
  ASSERT_NO_FATAL_FAILURE(Mint("volume-other"));
  Status st = EtcdGrantPrefix(Root(), "volume-other", "other/");
  ASSERT_TRUE(st.ok()) << st.ToString();
  // Their certificate works on their own prefix...
  auto out = Etcdctl(Tls("volume-other"), "put other/x 1");
  ASSERT_EQ(out.rc, 0) << out.out;
  // ...and reaches nothing of ours, through etcdctl or the product.
  out = Etcdctl(Tls("volume-other"), "get --prefix --keys-only stripefs/");
  EXPECT_NE(out.rc, 0) << out.out;
  EXPECT_NE(out.out.find("permission denied"), std::string::npos) << out.out;
  out = Etcdctl(Tls("volume-other"), "put stripefs/x intruder");
  EXPECT_NE(out.rc, 0) << out.out;
  const std::string theirs =
      "etcds://" + Endpoint() + "/stripefs?timeout_ms=2000&ca=" + Tls() +
      "/ca.crt&cert=" + Tls() + "/volume-other.crt&key=" + Tls() +
      "/volume-other.key";
  auto store = MetaStore::Open(theirs);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), EACCES) << store.status().ToString();
}

TEST_F(EtcdSecurityClusterTest, CredentialsArePrivateFiles) {
  struct stat st {};
  ASSERT_EQ(::stat(Tls().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  int keys = 0;
  for (const auto& e : std::filesystem::directory_iterator(Tls())) {
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << e.path();
    keys += e.path().extension() == ".key";
  }
  EXPECT_GE(keys, 4);  // ca, etcd.1, root, volume-stripefs
}

TEST_F(EtcdSecurityClusterTest, StatusReadsRaftRolesWithoutEtcdctl) {
  auto out =
      RunCommand("PATH=/nonexistent " STRIPEFS_BINARY " cluster status --dir " +
                 Dir() + " 2>&1");
  EXPECT_NE(out.out.find("leader"), std::string::npos) << out.out;
  EXPECT_EQ(out.out.find("NOT SERVING"), std::string::npos) << out.out;
}

TEST_F(EtcdSecurityClusterTest, PlaintextLocationsAreRefusedWithTheFix) {
  const std::string dir = Dir() + "/plain";
  auto out = RunCommand(std::string(STRIPEFS_BINARY) + " cluster up --dir " +
                        dir + " --meta-engine etcd --etcd etcd://" +
                        Endpoint() + "/plain 2>&1");
  EXPECT_NE(out.rc, 0);
  EXPECT_NE(out.out.find("--etcd-insecure"), std::string::npos) << out.out;
  out = RunCommand(std::string(STRIPEFS_BINARY) + " cluster up --dir " + dir +
                   " --meta-engine etcd --etcd etcd://198.18.0.1:2379/plain "
                   "--etcd-insecure 2>&1");
  EXPECT_NE(out.rc, 0);
  EXPECT_NE(out.out.find("loopback only"), std::string::npos) << out.out;
  out = RunCommand(
      std::string(STRIPEFS_BINARY) + " metad --key " + cluster_->key_file() +
      " --listen 127.0.0.1:0 --dir etcd://" + Endpoint() + "/plain 2>&1");
  EXPECT_NE(out.rc, 0);
  EXPECT_NE(out.out.find("--etcd-insecure"), std::string::npos) << out.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stripefs

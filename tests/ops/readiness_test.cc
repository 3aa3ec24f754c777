// sd_notify readiness of the real daemons: the test plays systemd with a
// datagram socket in NOTIFY_SOCKET, starts `stripefs metad` / `chunkd` and
// expects READY=1 only once they serve (metad: its address accepts
// connections; chunkd: metad lists it up), and STOPPING=1 on SIGTERM.
// Every wait is bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace stripefs {
namespace {

namespace sfs = std::filesystem;

class ReadinessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs-ready-XXXXXX";
    dir_ = mkdtemp(tmpl);
    ASSERT_EQ(std::system((std::string(STRIPEFS_BINARY) + " keygen " + dir_ +
                           "/key >/dev/null")
                              .c_str()),
              0);
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    std::error_code ec;
    sfs::remove_all(dir_, ec);
  }

  // A datagram socket at D/<name>.sock standing in for systemd's.
  UniqueFd NotifySocket(const std::string& name, std::string* path) {
    *path = dir_ + "/" + name + ".sock";
    UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path->c_str());
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0)
        << std::strerror(errno);
    return fd;
  }

  // Starts `stripefs ARGS` with NOTIFY_SOCKET=notify, output to D/<log>.
  pid_t Spawn(const std::vector<std::string>& args, const std::string& notify,
              const std::string& log) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (notify.empty())
        ::unsetenv("NOTIFY_SOCKET");
      else
        ::setenv("NOTIFY_SOCKET", notify.c_str(), 1);
      std::string out = dir_ + "/" + log;
      if (!std::freopen(out.c_str(), "a", stdout) ||
          !std::freopen(out.c_str(), "a", stderr))
        ::_exit(126);
      std::vector<char*> argv = {const_cast<char*>(STRIPEFS_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pids_.push_back(pid);
    return pid;
  }

  // Datagrams until one contains `what` (bounded: 60 s); all of them.
  std::string WaitFor(int fd, const std::string& what) {
    std::string all;
    for (int i = 0; i < 600 && all.find(what) == std::string::npos; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) all.append(buf, static_cast<size_t>(n)).append("\n");
    }
    return all;
  }

  // True when HOST:PORT accepts a TCP connection.
  static bool Accepts(const std::string& addr) {
    auto colon = addr.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port =
        htons(static_cast<uint16_t>(std::atoi(addr.c_str() + colon + 1)));
    if (::inet_pton(AF_INET, addr.substr(0, colon).c_str(), &a.sin_addr) != 1)
      return false;
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }

  // The address in "STATUS=serving on HOST:PORT..." of a READY message.
  static std::string ServingAddress(const std::string& msgs) {
    const std::string tag = "STATUS=serving on ";
    auto at = msgs.find(tag);
    if (at == std::string::npos) return "";
    auto end = msgs.find_first_of(",\n", at + tag.size());
    return msgs.substr(at + tag.size(), end - at - tag.size());
  }

  int ExitCode(pid_t pid) {
    int st = 0;
    for (int i = 0; i < 300; ++i) {  // <= 30 s
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        std::erase(pids_, pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      ::usleep(100'000);
    }
    return -2;
  }

  std::string Log(const std::string& name) {
    std::ifstream f(dir_ + "/" + name);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

  std::string dir_;
  std::vector<pid_t> pids_;
};

TEST_F(ReadinessTest, MetadIsReadyOnceListeningAndSaysStopping) {
  std::string path;
  UniqueFd sock = NotifySocket("metad", &path);
  pid_t pid = Spawn({"metad", "--dir", dir_ + "/meta", "--key", dir_ + "/key",
                     "--listen", "127.0.0.1:0", "--no-health-monitor"},
                    path, "metad.log");
  std::string msgs = WaitFor(sock.get(), "READY=1");
  ASSERT_NE(msgs.find("READY=1"), std::string::npos) << Log("metad.log");
  std::string addr = ServingAddress(msgs);
  ASSERT_FALSE(addr.empty()) << msgs;
  EXPECT_TRUE(Accepts(addr)) << addr;
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_NE(WaitFor(sock.get(), "STOPPING=1").find("STOPPING=1"),
            std::string::npos);
  EXPECT_EQ(ExitCode(pid), 0) << Log("metad.log");
}

TEST_F(ReadinessTest, ChunkdIsReadyOnceRegistered) {
  std::string meta_path, chunk_path;
  UniqueFd meta_sock = NotifySocket("metad", &meta_path);
  UniqueFd chunk_sock = NotifySocket("chunkd", &chunk_path);
  Spawn({"metad", "--dir", dir_ + "/meta", "--key", dir_ + "/key", "--listen",
         "127.0.0.1:0", "--no-health-monitor"},
        meta_path, "metad.log");
  std::string meta = ServingAddress(WaitFor(meta_sock.get(), "READY=1"));
  ASSERT_FALSE(meta.empty()) << Log("metad.log");
  pid_t chunkd = Spawn({"chunkd", "--id", "1", "--dir", dir_ + "/c1", "--meta",
                        meta, "--key", dir_ + "/key"},
                       chunk_path, "chunkd.log");
  std::string msgs = WaitFor(chunk_sock.get(), "READY=1");
  ASSERT_NE(msgs.find("READY=1"), std::string::npos) << Log("chunkd.log");
  EXPECT_NE(msgs.find("registered with " + meta), std::string::npos) << msgs;
  // Ready means registered: metad's map lists server 1 up right away.
  std::string out = dir_ + "/status.json";
  std::system((std::string(STRIPEFS_BINARY) + " status --json --meta " + meta +
               " --key " + dir_ + "/key >" + out + " 2>&1")
                  .c_str());
  std::string json = Log("status.json");
  EXPECT_NE(json.find("\"state\": \"up\""), std::string::npos) << json;
  ASSERT_EQ(::kill(chunkd, SIGTERM), 0);
  EXPECT_NE(WaitFor(chunk_sock.get(), "STOPPING=1").find("STOPPING=1"),
            std::string::npos);
  EXPECT_EQ(ExitCode(chunkd), 0) << Log("chunkd.log");
}

}  // namespace
}  // namespace stripefs

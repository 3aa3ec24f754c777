// session_bench: what the protocol sessions (v2, v3) cost against the framing
// they replaced, side by side in one run.
//
// Transport rows (a client thread and a server thread in this process, one
// TCP connection over 127.0.0.1, each call = a request frame, verified by
// the server, then a small reply frame verified by the client):
//   old: protocol v1 framing, CRC32C + HMAC-SHA256 over every frame (kept
//        here as a baseline only; the tree no longer speaks it);
//   new: protocol v3 framing, WriteFrame/ReadFrame with a session's
//        FrameCipher (a ChaCha20-Poly1305 tag under an implicit sequence
//        number; v2 used AES-256-GMAC the same way);
//   secure: the same v3 framing in secure mode (payload and bulk
//        ChaCha20-encrypted under the same AEAD, into the cipher's reused
//        buffer on send and in place on receive).
// Request sizes: 1 MiB of bulk (like WriteChunk) and 64 B of payload.
// CPU is getrusage(RUSAGE_SELF) user+system over the run, i.e. both ends.
// Then the end-to-end rows through the real RpcClient -> RpcServer (io_uring
// loop, handshake included in the first call), authenticated only and
// secure, and the crypto alone per MiB: HMAC-SHA256, the v3 tag
// (FrameCipher), secure mode's encrypt + tag, the v2 tag (AES-256-GMAC)
// and AES-256-GCM encryption, so the choices can be checked. ratio= lines
// compare secure with authenticated-only framing in the same run.
//
//   session_bench [--rounds N] [--quick]
#include <isa-l/crc.h>
#include <openssl/evp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/rpc/frame.h"
#include "backend/rpc/rpc_client.h"
#include "backend/rpc/rpc_server.h"
#include "backend/rpc/session.h"
#include "backend/rpc/tcp_socket.h"
#include "bench/support/process_sampling.h"

using namespace stripefs;
using namespace stripefs::rpc;
using stripefs::bench::CpuSeconds;
using stripefs::bench::LoadAvg;

namespace {

constexpr size_t kMiB = 1 << 20;

// ---- protocol v1 framing, the baseline: CRC32C + HMAC-SHA256 trailer ----
struct OldFraming {
  const ClusterKey& key;
  uint32_t Crc(const uint8_t* h, std::span<const uint8_t> p,
               std::span<const uint8_t> b) {
    uint32_t c = crc32_iscsi(const_cast<uint8_t*>(h), kFrameHeaderSize, ~0u);
    if (!p.empty())
      c = crc32_iscsi(const_cast<uint8_t*>(p.data()), int(p.size()), c);
    if (!b.empty())
      c = crc32_iscsi(const_cast<uint8_t*>(b.data()), int(b.size()), c);
    return ~c;
  }
  Status Write(int fd, FrameHeader h, std::span<const uint8_t> p,
               std::span<const uint8_t> b) {
    h.payload_len = uint32_t(p.size());
    h.bulk_len = uint32_t(b.size());
    uint8_t hdr[kFrameHeaderSize];
    EncodeHeader(h, hdr);
    uint32_t crc = Crc(hdr, p, b);
    std::memcpy(hdr + 24, &crc, 4);
    std::span<const uint8_t> parts[] = {{hdr, kFrameHeaderSize}, p, b};
    Mac mac = key.Compute(parts);
    iovec iov[4] = {{hdr, kFrameHeaderSize},
                    {const_cast<uint8_t*>(p.data()), p.size()},
                    {const_cast<uint8_t*>(b.data()), b.size()},
                    {mac.data(), mac.size()}};
    return SendAll(fd, iov, 4, NoDeadline());
  }
  Status Read(int fd, Frame* f) {
    uint8_t hdr[kFrameHeaderSize];
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, hdr, kFrameHeaderSize, NoDeadline(), false));
    uint32_t crc;
    std::memcpy(&crc, hdr + 24, 4);
    std::memset(hdr + 24, 0, 4);
    STRIPEFS_RETURN_IF_ERROR(ParseHeader(hdr, &f->header));
    f->payload.resize(f->header.payload_len);
    f->bulk.resize(f->header.bulk_len);
    Mac mac;
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, f->payload.data(), f->payload.size(), NoDeadline(), true));
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, f->bulk.data(), f->bulk.size(), NoDeadline(), true));
    STRIPEFS_RETURN_IF_ERROR(
        ReadFull(fd, mac.data(), mac.size(), NoDeadline(), true));
    if (Crc(hdr, f->payload, f->bulk) != crc) return Status(EBADMSG, "crc");
    std::memcpy(hdr + 24, &crc, 4);  // the MAC covers the header as sent
    std::span<const uint8_t> parts[] = {
        {hdr, kFrameHeaderSize}, f->payload, f->bulk};
    if (!MacEqual(key.Compute(parts), mac)) return Status(EACCES, "mac");
    return Status::Ok();
  }
};

// ---- protocol v2 framing: the real WriteFrame/ReadFrame with a session --
struct NewFraming {
  FrameCipher send, recv;
  Status Write(int fd, FrameHeader h, std::span<const uint8_t> p,
               std::span<const uint8_t> b) {
    return WriteFrame(fd, send, h, p, b, NoDeadline());
  }
  Status Read(int fd, Frame* f) {
    STRIPEFS_ASSIGN_OR_RETURN(*f, ReadFrame(fd, recv, NoDeadline()));
    return Status::Ok();
  }
};

struct Sample {
  double calls_per_s = 0, mib_per_s = 0, cpu_ms_per_mib = 0,
         cpu_us_per_call = 0;
};

// One connection, `calls` request/ack round trips of `p`/`b`.
template <typename F>
Sample RunLink(F client, F server, size_t payload, size_t bulk, int calls) {
  std::string addr;
  auto l = ListenTcp("127.0.0.1:0", &addr);
  auto c = ConnectTcp(addr, Clock::now() + std::chrono::seconds(10));
  UniqueFd s(::accept4(l->get(), nullptr, nullptr, SOCK_NONBLOCK));
  std::vector<uint8_t> p(payload, 1), b(bulk, 2);
  std::thread t([&] {
    Frame f;
    for (int i = 0; i < calls; ++i) {
      if (!server.Read(s.get(), &f).ok()) std::abort();
      FrameHeader rh;
      rh.flags = kFlagResponse;
      rh.request_id = f.header.request_id;
      uint8_t ok[6] = {};
      if (!server.Write(s.get(), rh, ok, {}).ok()) std::abort();
    }
  });
  double cpu0 = CpuSeconds();
  auto t0 = Clock::now();
  Frame f;
  for (int i = 0; i < calls; ++i) {
    FrameHeader h;
    h.request_id = uint64_t(i);
    if (!client.Write(c->get(), h, p, b).ok()) std::abort();
    if (!client.Read(c->get(), &f).ok()) std::abort();
  }
  t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = CpuSeconds() - cpu0;
  double mib = double(payload + bulk) * calls / kMiB;
  return {calls / secs, mib / secs, cpu * 1e3 / mib, cpu * 1e6 / calls};
}

class NullHandler : public RpcHandler {
 public:
  std::string Role() const override { return "bench"; }
  void Handle(const rpc::Caller&, uint16_t, std::span<const uint8_t>,
              AlignedBytes&, RpcReply* reply) override {
    reply->payload.assign(6, 0);
  }
};

Sample RunRpc(const std::string& addr, std::shared_ptr<const ClusterKey> key,
              size_t payload, size_t bulk, int calls) {
  RpcClient client(addr, key);
  std::vector<uint8_t> p(payload, 1), b(bulk, 2);
  double cpu0 = CpuSeconds();
  auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) {
    if (!client.Call(0x7E20, p, b).ok()) std::abort();
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = CpuSeconds() - cpu0;
  double mib = double(payload + bulk) * calls / kMiB;
  return {calls / secs, mib / secs, cpu * 1e3 / mib, cpu * 1e6 / calls};
}

// CPU-ms per MiB of one crypto primitive over 1 MiB buffers.
template <typename F>
double CryptoMsPerMiB(F op, int reps) {
  double cpu0 = CpuSeconds();
  for (int i = 0; i < reps; ++i) op();
  return (CpuSeconds() - cpu0) * 1e3 / reps;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--quick")) {
      rounds = 1;
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  std::array<uint8_t, kClusterKeySize> kb;
  kb.fill(9);
  auto key = ClusterKey::FromBytes(kb);
  std::printf("loadavg at start: %s\n", LoadAvg().c_str());

  struct Case {
    const char* name;
    size_t payload, bulk;
    int calls;
  } cases[] = {{"1 MiB request", 16, kMiB, 300},
               {"64 B request", 64, 0, 20000}};
  const auto secure_key = key->WithSecureWire(true);
  // [case][v1=0, v3=1, v3 secure=2] -> samples over rounds; rpc [case][mode]
  std::vector<Sample> link[2][3], rpc[2][2];
  RpcServerOptions so;
  so.log_name = "bench";
  NullHandler handler;
  auto server = RpcServer::Start(so, key, &handler);
  auto secure_server = RpcServer::Start(so, secure_key, &handler);
  if (!server.ok() || !secure_server.ok()) return 1;
  for (int r = 0; r < rounds; ++r) {
    for (int ci = 0; ci < 2; ++ci) {
      const Case& c = cases[ci];
      for (int j = 0; j < 3; ++j) {
        const int k = (r + j) % 3;  // rotate which goes first
        if (k == 0) {
          link[ci][0].push_back(RunLink(OldFraming{*key}, OldFraming{*key},
                                        c.payload, c.bulk, c.calls));
          continue;
        }
        const ClusterKey& sk = k == 2 ? *secure_key : *key;
        Nonce n1, n2;  // stand-ins for the two hello messages
        n1.fill(uint8_t(r));
        n2.fill(uint8_t(r + 1));
        Session cs = DeriveSession(sk, Role::kClient, n1, n2);
        Session ss = DeriveSession(sk, Role::kServer, n1, n2);
        link[ci][k].push_back(
            RunLink(NewFraming{std::move(cs.send), std::move(cs.recv)},
                    NewFraming{std::move(ss.send), std::move(ss.recv)},
                    c.payload, c.bulk, c.calls));
      }
      for (int j = 0; j < 2; ++j) {
        const int k = (r + j) % 2;
        rpc[ci][k].push_back(RunRpc((k ? *secure_server : *server)->address(),
                                    k ? secure_key : key, c.payload, c.bulk,
                                    c.calls));
      }
    }
    std::fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
  }
  (*server)->Stop();
  (*secure_server)->Stop();

  auto med = [](const std::vector<Sample>& v, double Sample::*m) {
    std::vector<double> x;
    for (auto& s : v) x.push_back(s.*m);
    return Median(x);
  };
  std::printf(
      "\n| request (median of %d rounds) | framing | calls/s | MiB/s "
      "| CPU-ms per MiB | CPU-us per call |\n",
      rounds);
  std::printf("|---|---|---:|---:|---:|---:|\n");
  for (int ci = 0; ci < 2; ++ci) {
    const char* names[] = {
        "v1: CRC32C + HMAC-SHA256 per frame",
        "v3: session, Poly1305 tag per frame (authenticated only)",
        "v3 secure: ChaCha20-Poly1305 encrypt + tag per frame"};
    for (int k = 0; k < 3; ++k) {
      std::printf("| %s | %s | %.0f | %.1f | %.2f | %.1f |\n", cases[ci].name,
                  names[k], med(link[ci][k], &Sample::calls_per_s),
                  med(link[ci][k], &Sample::mib_per_s),
                  med(link[ci][k], &Sample::cpu_ms_per_mib),
                  med(link[ci][k], &Sample::cpu_us_per_call));
    }
    for (int k = 0; k < 2; ++k) {
      std::printf(
          "| %s | v3%s end to end: RpcClient -> RpcServer (io_uring) | "
          "%.0f | %.1f | %.2f | %.1f |\n",
          cases[ci].name, k ? " secure" : "",
          med(rpc[ci][k], &Sample::calls_per_s),
          med(rpc[ci][k], &Sample::mib_per_s),
          med(rpc[ci][k], &Sample::cpu_ms_per_mib),
          med(rpc[ci][k], &Sample::cpu_us_per_call));
    }
  }
  for (int ci = 0; ci < 2; ++ci) {
    double o = med(link[ci][0], &Sample::cpu_ms_per_mib);
    double n = med(link[ci][1], &Sample::cpu_ms_per_mib);
    double sec = med(link[ci][2], &Sample::cpu_ms_per_mib);
    double ra = med(rpc[ci][0], &Sample::cpu_ms_per_mib);
    double rs = med(rpc[ci][1], &Sample::cpu_ms_per_mib);
    std::printf("ratio=%.3f cpu_per_mib new/old (%s)\n", o > 0 ? n / o : 0,
                cases[ci].name);
    std::printf("ratio=%.3f cpu_per_mib secure/authenticated, framing (%s)\n",
                n > 0 ? sec / n : 0, cases[ci].name);
    std::printf(
        "ratio=%.3f cpu_per_mib secure/authenticated, end to end (%s)\n",
        ra > 0 ? rs / ra : 0, cases[ci].name);
  }

  // Crypto alone, 1 MiB buffers.
  std::vector<uint8_t> buf(kMiB, 3), out(kMiB + 16);
  std::span<const uint8_t> parts[] = {buf};
  Nonce n1{}, n2{};
  Session s = DeriveSession(*key, Role::kClient, n1, n2);
  const int reps = 200;
  double hmac = CryptoMsPerMiB([&] { (void)key->Compute(parts); }, reps);
  double crc = CryptoMsPerMiB(
      [&] { (void)crc32_iscsi(buf.data(), int(buf.size()), ~0u); }, reps);
  double tag = CryptoMsPerMiB([&] { (void)s.send.Seal(parts); }, reps);
  double seal = CryptoMsPerMiB(
      [&] { (void)s.send.SealEncrypt({}, parts, out.data()); }, reps);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  uint8_t k32[32] = {1}, iv[12] = {};
  EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, k32, nullptr);
  double gmac = CryptoMsPerMiB(
      [&] {
        int len = 0;
        uint8_t t[16];
        EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv);
        EVP_EncryptUpdate(ctx, nullptr, &len, buf.data(), int(buf.size()));
        EVP_EncryptFinal_ex(ctx, out.data(), &len);
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, t);
      },
      reps);
  double gcm = CryptoMsPerMiB(
      [&] {
        int len = 0;
        EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv);
        EVP_EncryptUpdate(ctx, out.data(), &len, buf.data(), int(buf.size()));
        EVP_EncryptFinal_ex(ctx, out.data() + len, &len);
      },
      reps);
  EVP_CIPHER_CTX_free(ctx);
  std::printf("\n| primitive over 1 MiB (one core) | CPU-ms per MiB |\n");
  std::printf("|---|---:|\n");
  std::printf("| CRC32C (ISA-L), v1 only | %.3f |\n", crc);
  std::printf("| HMAC-SHA256, v1 | %.3f |\n", hmac);
  std::printf("| ChaCha20-Poly1305 (tag only, FrameCipher), v3 | %.3f |\n",
              tag);
  std::printf("| ChaCha20-Poly1305 encrypt + tag (secure mode), v3 | %.3f |\n",
              seal);
  std::printf("| AES-256-GMAC (tag only), v2 | %.3f |\n", gmac);
  std::printf("| AES-256-GCM encrypt + tag (not used) | %.3f |\n", gcm);
  std::printf("ratio=%.3f poly1305/gmac (v3/v2 tag)\n",
              gmac > 0 ? tag / gmac : 0);
  std::printf("ratio=%.3f gmac/hmac_sha256\n", hmac > 0 ? gmac / hmac : 0);
  std::printf("ratio=%.3f gcm_encrypt/gmac\n", gmac > 0 ? gcm / gmac : 0);
  std::printf(
      "ratio=%.3f chacha20poly1305_encrypt/poly1305_tag (secure/auth)\n",
      tag > 0 ? seal / tag : 0);
  std::printf("loadavg at end: %s\n", LoadAvg().c_str());
  return 0;
}

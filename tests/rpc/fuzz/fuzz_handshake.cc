// libFuzzer target: every decoder of handshake bytes. The first input byte
// picks the receive sizes, the rest is what a peer sends:
//  1. ServerHandshake (the server side, fed in pieces): never crashes, asks
//     only for the bytes of the current message (never more than one
//     ClientHello + one ClientProof in all), and its ServerHello parses;
//  2. AcceptServerHello on the first 72 bytes (the client side);
//  3. ParseHandshakePrefix for every kind;
//  4. the blocking ClientHandshake and RunServerHandshake reading the bytes
//     from a socket (EOF after them).
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/rpc/handshake.h"
#include "backend/rpc/tcp_socket.h"
#include "tests/rpc/fuzz/fuzz_key.h"

using namespace stripefs::rpc;
using stripefs::Status;

namespace {

void FeedServer(std::span<const uint8_t> in, size_t step) {
  const ClusterKey& key = *FuzzKey();
  ServerHandshake hs;
  size_t off = 0;
  while (off < in.size() && !hs.done()) {
    std::span<uint8_t> buf = hs.RecvBuffer();
    if (buf.empty() || buf.size() > kClientHelloSize) std::abort();
    size_t n = std::min({buf.size(), in.size() - off, step});
    std::memcpy(buf.data(), in.data() + off, n);
    off += n;
    if (!hs.Commit(n, ServerAuth{&key, {ServerRole::kChunkd, 1}, nullptr}).ok())
      break;
    if (hs.hello_ready() &&
        !ParseHandshakePrefix(hs.server_hello(), HandshakeKind::kServerHello)
             .ok())
      std::abort();
  }
  if (off > kClientHelloSize + kClientProofSize) std::abort();
}

void OverSocket(std::span<const uint8_t> in, bool server) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return;
  UniqueFd a(sv[0]), b(sv[1]);
  ssize_t n = in.empty() ? 0 : ::send(a.get(), in.data(), in.size(), 0);
  if (n != static_cast<ssize_t>(in.size())) return;
  ::shutdown(a.get(), SHUT_WR);
  Deadline d = Clock::now() + std::chrono::seconds(1);
  if (server) {
    (void)RunServerHandshake(b.get(), ServerAuth{FuzzKey().get(), {}, nullptr},
                             d, nullptr);
  } else {
    (void)ClientHandshake(b.get(), *FuzzKey(), ServerBinding{}, d);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step_choices[] = {1, 3, 7, 8, 39, 40, 104, 144};
  std::span<const uint8_t> in(data + 1, size - 1);
  FeedServer(in, step_choices[data[0] % 8]);
  if (in.size() >= kServerHelloSize) {
    (void)AcceptServerHello(in.first(kServerHelloSize), *FuzzKey(),
                            FuzzClientHello(), ServerBinding{});
  }
  for (HandshakeKind k :
       {HandshakeKind::kClientHello, HandshakeKind::kServerHello,
        HandshakeKind::kClientProof})
    (void)ParseHandshakePrefix(in, k);
  if (in.size() <= 4096) {
    OverSocket(in, true);
    OverSocket(in, false);
  }
  return 0;
}

// Writes the seed corpora of the RPC fuzz targets (tests/rpc/corpus/):
// one request and one response payload of every message type with sample
// values, a few valid frames under the fuzz link (frame 0 of a session),
// the assembler's seeds (a receive-size byte, then one frame or frames 0
// and 1 of a session), and handshake messages. Run by hand when the
// messages change:  rpc_fuzz_seeds tests/rpc/corpus
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/frame.h"
#include "backend/rpc/handshake.h"
#include "tests/rpc/fuzz/fuzz_key.h"
#include "tests/rpc/sample_values.h"

using namespace stripefs;
using namespace stripefs::rpc;

namespace {

void Write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()),
          static_cast<std::streamsize>(bytes.size()));
}

template <MsgType T>
void Seeds(const std::string& dir, const std::string& frame_dir) {
  testing::Sampler smp;
  auto req = EncodeRequest<T>(smp.Make<typename Msg<T>::Request>());
  auto resp =
      EncodeResponse<T>(Status::Ok(), smp.Make<typename Msg<T>::Response>());
  uint16_t t = static_cast<uint16_t>(T);
  std::string name = MsgTypeName(t);
  std::vector<uint8_t> a = {static_cast<uint8_t>(t),
                            static_cast<uint8_t>(t >> 8), 0};
  std::vector<uint8_t> b = {static_cast<uint8_t>(t),
                            static_cast<uint8_t>(t >> 8), 1};
  a.insert(a.end(), req.begin(), req.end());
  b.insert(b.end(), resp.begin(), resp.end());
  Write(dir + "/" + name + ".req", a);
  Write(dir + "/" + name + ".resp", b);
  FrameHeader h;
  h.type = t;
  h.request_id = t;
  stripefs::testing::Link link = FuzzLink();
  Write(frame_dir + "/" + name + ".frame", EncodeFrame(link.tx, h, req, {}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  std::string payload_dir = std::string(argv[1]) + "/payload";
  std::string frame_dir = std::string(argv[1]) + "/frame";
  std::filesystem::create_directories(payload_dir);
  std::filesystem::create_directories(frame_dir);
#define STRIPEFS_X(name, num, idem) \
  Seeds<MsgType::k##name>(payload_dir, frame_dir);
  STRIPEFS_RPC_MESSAGES(STRIPEFS_X)
#undef STRIPEFS_X
  {
    // GrantedCall (chunk_grant.h): two grants around a WriteChunk and one
    // around an ApplyChunkOps request.
    ChunkGrant g;
    g.ops = kGrantAllOps;
    g.inode = 7;
    g.issued_ms = 1'800'000'000'000;
    g.expires_ms = g.issued_ms + kGrantLifetimeMs;
    g.mac.fill(0x5a);
    ChunkGrant g2 = g;
    g2.ops = kGrantRead;
    g2.inode = 8;
    g2.first_stripe = 3;
    g2.last_stripe = 9;
    const EncodedGrant two[] = {EncodeGrant(g), EncodeGrant(g2)};
    testing::Sampler smp;
    auto write = EncodeRequest<MsgType::kWriteChunk>(
        smp.Make<Msg<MsgType::kWriteChunk>::Request>());
    auto apply = EncodeRequest<MsgType::kApplyChunkOps>(
        smp.Make<Msg<MsgType::kApplyChunkOps>::Request>());
    const uint8_t t[2] = {static_cast<uint8_t>(kGrantedCallType),
                          static_cast<uint8_t>(kGrantedCallType >> 8)};
    for (auto [name, inner, payload, n] :
         {std::tuple{"GrantedCall.req", MsgType::kWriteChunk, &write, 2},
          std::tuple{"GrantedCall_apply.req", MsgType::kApplyChunkOps, &apply,
                     1}}) {
      std::vector<uint8_t> seed = {t[0], t[1], 0};
      auto head = EncodeGrantedHead(
          static_cast<uint16_t>(inner),
          std::span<const EncodedGrant>(two, static_cast<size_t>(n)));
      seed.insert(seed.end(), head.begin(), head.end());
      seed.insert(seed.end(), payload->begin(), payload->end());
      Write(payload_dir + "/" + name, seed);
    }
  }
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kReadChunk);
  h.flags = kFlagResponse;
  std::vector<uint8_t> bulk(300, 0xab);
  auto ok = EncodeResponse<MsgType::kReadChunk>(Status::Ok(), {});
  auto err = EncodeResponse<MsgType::kReadChunk>(Status(ENOENT, "absent"), {});
  {
    stripefs::testing::Link a = FuzzLink(), b = FuzzLink();
    Write(frame_dir + "/readchunk_bulk.frame", EncodeFrame(a.tx, h, ok, bulk));
    Write(frame_dir + "/error.frame", EncodeFrame(b.tx, h, err, {}));
    // 357 bytes (a multiple of 3): fuzz_frame's shaped read of it expects
    // exactly its payload and bulk lengths, so it lands in place.
    stripefs::testing::Link c = FuzzLink();
    std::vector<uint8_t> bulk301(301, 0xcd);
    Write(frame_dir + "/readchunk_in_place.frame",
          EncodeFrame(c.tx, h, ok, bulk301));
  }
  // Assembler: step byte + frame 0, and step byte + frames 0 and 1.
  std::string asm_dir = std::string(argv[1]) + "/assembler";
  std::filesystem::create_directories(asm_dir);
  const std::vector<uint8_t> bodies[] = {{}, {1, 2, 3}, bulk};
  for (int i = 0; i < 12; ++i) {
    stripefs::testing::Link link = FuzzLink();
    FrameHeader fh;
    fh.type = static_cast<uint16_t>(MsgType::kWriteChunk);
    fh.request_id = static_cast<uint64_t>(i);
    auto f0 = EncodeFrame(link.tx, fh, bodies[i % 3], bodies[(i + 1) % 3]);
    auto f1 = EncodeFrame(link.tx, fh, bodies[(i + 2) % 3], {});
    std::vector<uint8_t> one = {static_cast<uint8_t>(i)};
    one.insert(one.end(), f0.begin(), f0.end());
    std::vector<uint8_t> two = one;
    two.insert(two.end(), f1.begin(), f1.end());
    char name[32];
    std::snprintf(name, sizeof(name), "/seed_%02d", i);
    Write(asm_dir + name, one);
    Write(asm_dir + name + "_twice", two);
  }
  // Handshake: step byte + ClientHello + ClientProof (the proof cannot match
  // the server's random nonce), and a ServerHello valid for the fixed
  // client nonce.
  std::string hs_dir = std::string(argv[1]) + "/handshake";
  std::filesystem::create_directories(hs_dir);
  auto hello = FuzzClientHello();
  Nonce server;
  server.fill(0x5e);
  std::vector<uint8_t> sh(1 + kServerHelloSize, 0);
  EncodeHandshakePrefix(HandshakeKind::kServerHello, sh.data() + 1);
  std::memcpy(sh.data() + 1 + kHandshakePrefixSize, server.data(), kNonceSize);
  sh[1 + kHandshakePrefixSize + kNonceSize] =
      static_cast<uint8_t>(ServerRole::kChunkd);
  sh[1 + kHandshakePrefixSize + kNonceSize + 4] = 1;  // chunkd 1
  std::span<const uint8_t> head(sh.data() + 1, kServerProofAt);
  Proof sp = HandshakeProof(*FuzzKey(), Role::kServer, hello, head);
  std::memcpy(sh.data() + 1 + kServerProofAt, sp.data(), kProofSize);
  std::vector<uint8_t> c(1 + kClientHelloSize + kClientProofSize, 0);
  c[0] = 5;
  std::memcpy(c.data() + 1, hello.data(), kClientHelloSize);
  uint8_t* proof = c.data() + 1 + kClientHelloSize;
  EncodeHandshakePrefix(HandshakeKind::kClientProof, proof);
  Proof cp = HandshakeProof(*FuzzKey(), Role::kClient, hello, head);
  std::memcpy(proof + kHandshakePrefixSize, cp.data(), kProofSize);
  Write(hs_dir + "/client_messages", c);
  Write(hs_dir + "/server_hello", sh);
  std::vector<uint8_t> rej(1 + kRejectFrameSize);
  EncodeRejectFrame(FrameError::kBadHandshake, rej.data() + 1);
  Write(hs_dir + "/reject", rej);
  std::printf("wrote seeds to %s\n", argv[1]);
  return 0;
}

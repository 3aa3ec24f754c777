// Writes the seed corpora of the RPC fuzz targets (tests/rpc/corpus/):
// one request and one response payload of every message type with sample
// values, and a few valid frames under the fuzz key. Run by hand when the
// messages change:  rpc_fuzz_seeds tests/rpc/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "backend/rpc/frame.h"
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
  Write(frame_dir + "/" + name + ".frame", EncodeFrame(*FuzzKey(), h, req, {}));
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
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kReadChunk);
  h.flags = kFlagResponse;
  std::vector<uint8_t> bulk(300, 0xab);
  auto ok = EncodeResponse<MsgType::kReadChunk>(Status::Ok(), {});
  Write(frame_dir + "/readchunk_bulk.frame",
        EncodeFrame(*FuzzKey(), h, ok, bulk));
  auto err = EncodeResponse<MsgType::kReadChunk>(Status(ENOENT, "absent"), {});
  Write(frame_dir + "/error.frame", EncodeFrame(*FuzzKey(), h, err, {}));
  std::printf("wrote seeds to %s\n", argv[1]);
  return 0;
}

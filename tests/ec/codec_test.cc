#include "ec/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ec/crc32c.h"
#include "tests/ec/gf256_reference.h"
#include "tests/support/random_bytes.h"

namespace stripefs::ec {
namespace {

using Chunks = std::vector<std::vector<uint8_t>>;

Chunks RandomChunks(int count, size_t len, uint32_t seed) {
  Chunks c;
  for (int i = 0; i < count; ++i)
    c.push_back(stripefs::testing::RandomBytes(
        len, seed * 1000 + static_cast<uint32_t>(i)));
  return c;
}

std::vector<const uint8_t*> ConstPtrs(const Chunks& c, size_t from, size_t to) {
  std::vector<const uint8_t*> p;
  for (size_t i = from; i < to; ++i) p.push_back(c[i].data());
  return p;
}

std::vector<uint8_t*> Ptrs(Chunks& c, size_t from, size_t to) {
  std::vector<uint8_t*> p;
  for (size_t i = from; i < to; ++i) p.push_back(c[i].data());
  return p;
}

// All k+m chunks (data then parity) of a freshly encoded random stripe.
Chunks EncodedStripe(const Codec& codec, size_t len, uint32_t seed) {
  const int k = codec.k(), m = codec.m();
  Chunks all = RandomChunks(k, len, seed);
  all.resize(static_cast<size_t>(k + m), std::vector<uint8_t>(len));
  auto d = ConstPtrs(all, 0, static_cast<size_t>(k));
  auto p = Ptrs(all, static_cast<size_t>(k), static_cast<size_t>(k + m));
  EXPECT_TRUE(codec.Encode(d, p, len).ok());
  return all;
}

// Calls fn(pattern) for every subset of {0..n-1} of size 1..max.
template <typename Fn>
void ForEachPattern(int n, int max, Fn fn) {
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) > max) continue;
    std::vector<int> pattern;
    for (int i = 0; i < n; ++i)
      if (mask & (1u << i)) pattern.push_back(i);
    fn(pattern);
  }
}

struct Geometry {
  int k, m;
};

class CodecGeometryTest : public ::testing::TestWithParam<Geometry> {};

const size_t kLengths[] = {1, 63, 4096, 256 * 1024 + 17};

TEST_P(CodecGeometryTest, EncodeMatchesIndependentReference) {
  auto [k, m] = GetParam();
  auto codec = Codec::Create(k, m);
  ASSERT_TRUE(codec.ok()) << codec.status().ToString();
  for (size_t len : {size_t{1}, size_t{63}, size_t{4096}, size_t{1000}}) {
    Chunks all = EncodedStripe(**codec, len, static_cast<uint32_t>(len));
    Chunks data(all.begin(), all.begin() + k);
    Chunks expected = testing::ReferenceEncode(k, m, data);
    for (int p = 0; p < m; ++p) {
      ASSERT_EQ(all[static_cast<size_t>(k + p)],
                expected[static_cast<size_t>(p)])
          << "parity " << p << " len " << len;
    }
  }
  EXPECT_EQ((*codec)->encode_matrix(), testing::CauchyMatrix(k, m));
}

TEST_P(CodecGeometryTest, ReconstructsEveryErasurePatternUpToM) {
  auto [k, m] = GetParam();
  const int n = k + m;
  auto codec = Codec::Create(k, m);
  ASSERT_TRUE(codec.ok());
  for (size_t len : kLengths) {
    const Chunks original = EncodedStripe(**codec, len, 7u + len);
    Chunks work = original;
    int patterns = 0;
    ForEachPattern(n, m, [&, k = k, m = m](const std::vector<int>& lost) {
      for (int e : lost)
        std::memset(work[static_cast<size_t>(e)].data(), 0xEE, len);
      auto ptrs = Ptrs(work, 0, static_cast<size_t>(n));
      Status st = (*codec)->Reconstruct(ptrs, lost, len);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int e : lost) {
        ASSERT_EQ(work[static_cast<size_t>(e)],
                  original[static_cast<size_t>(e)])
            << "chunk " << e << " len " << len << " k=" << k << " m=" << m;
      }
      ++patterns;
    });
    int expected = 0;
    ForEachPattern(n, m, [&](const std::vector<int>&) { ++expected; });
    EXPECT_EQ(patterns, expected);
  }
}

TEST_P(CodecGeometryTest, ParityDeltaEqualsFullReencode) {
  auto [k, m] = GetParam();
  auto codec = Codec::Create(k, m);
  ASSERT_TRUE(codec.ok());
  const size_t len = 64 * 1024 + 5;
  Chunks all = EncodedStripe(**codec, len, 99);
  std::mt19937 rng(5);
  for (int round = 0; round < 2 * k; ++round) {
    const int idx = static_cast<int>(rng() % static_cast<unsigned>(k));
    const size_t off = rng() % len;
    const size_t n = 1 + rng() % (len - off);
    std::vector<uint8_t> new_bytes(n);
    for (auto& b : new_bytes) b = static_cast<uint8_t>(rng());
    std::vector<uint8_t*> parity_at;
    for (int p = 0; p < m; ++p)
      parity_at.push_back(all[static_cast<size_t>(k + p)].data() + off);
    ASSERT_TRUE((*codec)
                    ->UpdateParity(idx,
                                   all[static_cast<size_t>(idx)].data() + off,
                                   new_bytes.data(), parity_at, n)
                    .ok());
    std::memcpy(all[static_cast<size_t>(idx)].data() + off, new_bytes.data(),
                n);
    Chunks reencoded = all;
    auto d = ConstPtrs(reencoded, 0, static_cast<size_t>(k));
    auto p =
        Ptrs(reencoded, static_cast<size_t>(k), static_cast<size_t>(k + m));
    ASSERT_TRUE((*codec)->Encode(d, p, len).ok());
    ASSERT_EQ(all, reencoded) << "round " << round;
  }
}

TEST_P(CodecGeometryTest, TooManyLossesIsAnErrorAndLeavesOutputsAlone) {
  auto [k, m] = GetParam();
  const int n = k + m;
  auto codec = Codec::Create(k, m);
  ASSERT_TRUE(codec.ok());
  Chunks work = EncodedStripe(**codec, 100, 3);
  std::vector<int> erased, unavailable;
  for (int i = 0; i < m; ++i) erased.push_back(i);
  unavailable.push_back(m);  // m+1 chunks gone in total
  for (int e : erased)
    std::memset(work[static_cast<size_t>(e)].data(), 0xAB, 100);
  auto ptrs = Ptrs(work, 0, static_cast<size_t>(n));
  Status st = (*codec)->Reconstruct(ptrs, erased, 100, unavailable);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  for (int e : erased)
    EXPECT_EQ(work[static_cast<size_t>(e)], std::vector<uint8_t>(100, 0xAB));
}

INSTANTIATE_TEST_SUITE_P(AllGeometries, CodecGeometryTest,
                         ::testing::Values(Geometry{2, 1}, Geometry{4, 2},
                                           Geometry{6, 3}, Geometry{8, 3},
                                           Geometry{10, 4}, Geometry{12, 4}),
                         [](const auto& info) {
                           return std::to_string(info.param.k) + "p" +
                                  std::to_string(info.param.m);
                         });

TEST(CodecTest, RejectsInvalidGeometry) {
  for (auto [k, m] : {std::pair{0, 2}, {4, 0}, {-1, 1}, {30, 3}, {32, 1}}) {
    auto c = Codec::Create(k, m);
    ASSERT_FALSE(c.ok()) << k << "+" << m;
    EXPECT_EQ(c.status().code(), EINVAL);
    EXPECT_NE(c.status().message().find("k + m <= 32"), std::string::npos);
  }
  EXPECT_TRUE(Codec::Create(31, 1).ok());
  EXPECT_TRUE(Codec::Create(1, 31).ok());
}

TEST(CodecTest, RejectsMisuse) {
  auto codec = Codec::Create(4, 2);
  ASSERT_TRUE(codec.ok());
  Chunks c = RandomChunks(6, 64, 1);
  auto d = ConstPtrs(c, 0, 4);
  auto p = Ptrs(c, 4, 6);
  EXPECT_EQ((*codec)->Encode(d, p, 0).code(), EINVAL);  // zero length
  EXPECT_EQ((*codec)->Encode(ConstPtrs(c, 0, 3), p, 64).code(), EINVAL);
  std::vector<const uint8_t*> with_null = d;
  with_null[2] = nullptr;
  EXPECT_EQ((*codec)->Encode(with_null, p, 64).code(), EINVAL);
  auto all = Ptrs(c, 0, 6);
  EXPECT_EQ((*codec)->Reconstruct(all, std::vector<int>{}, 64).code(), EINVAL);
  EXPECT_EQ((*codec)->Reconstruct(all, std::vector<int>{6}, 64).code(), EINVAL);
  EXPECT_EQ((*codec)->Reconstruct(all, std::vector<int>{1, 1}, 64).code(),
            EINVAL);
  EXPECT_EQ(
      (*codec)->Reconstruct(Ptrs(c, 0, 5), std::vector<int>{1}, 64).code(),
      EINVAL);
  EXPECT_EQ((*codec)->UpdateParity(4, c[0].data(), c[1].data(), p, 64).code(),
            EINVAL);  // parity index is not a data index
}

TEST(CodecTest, DecodeTablesAreCachedPerPattern) {
  auto codec = Codec::Create(4, 2, /*cache_capacity=*/2);
  ASSERT_TRUE(codec.ok());
  Chunks work = EncodedStripe(**codec, 128, 11);
  auto ptrs = Ptrs(work, 0, 6);
  std::vector<int> a{0}, b{1}, c{2};
  ASSERT_TRUE((*codec)->Reconstruct(ptrs, a, 128).ok());
  ASSERT_TRUE((*codec)->Reconstruct(ptrs, a, 128).ok());
  EXPECT_EQ((*codec)->decode_tables_built(), 1u);
  ASSERT_TRUE((*codec)->Reconstruct(ptrs, b, 128).ok());
  ASSERT_TRUE((*codec)->Reconstruct(ptrs, c, 128).ok());  // evicts {0}
  ASSERT_TRUE((*codec)->Reconstruct(ptrs, a, 128).ok());
  EXPECT_EQ((*codec)->decode_tables_built(), 4u);
}

TEST(CodecTest, ConcurrentReconstructIsSafe) {
  auto codec = Codec::Create(6, 3, 4);
  ASSERT_TRUE(codec.ok());
  const Chunks original = EncodedStripe(**codec, 4096, 21);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Chunks work = original;
      for (int i = 0; i < 200; ++i) {
        std::vector<int> lost{(t + i) % 9, (t + i + 3) % 9};
        auto ptrs = Ptrs(work, 0, 9);
        if (!(*codec)->Reconstruct(ptrs, lost, 4096).ok() || work != original)
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Crc32cTest, KnownVectorsAndChaining) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(s, 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(s, 0), 0u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(Crc32c(s + 4, 5, Crc32c(s, 4)), 0xE3069283u);
}

// The combined CRC of A||B equals the direct CRC, for random data and random
// split points (including empty pieces and the 4 KiB blocks the chunk store
// combines).
TEST(Crc32cTest, CombineEqualsDirectCrcForRandomSplits) {
  const std::vector<uint8_t> data =
      stripefs::testing::RandomBytes(size_t{1} << 20, 1313);
  std::mt19937 rng(1314);
  for (int round = 0; round < 200; ++round) {
    const size_t len = rng() % (data.size() + 1);
    const size_t cut = len == 0 ? 0 : rng() % (len + 1);
    const uint32_t a = Crc32c(data.data(), cut);
    const uint32_t b = Crc32c(data.data() + cut, len - cut);
    SCOPED_TRACE("len " + std::to_string(len) + " cut " + std::to_string(cut));
    EXPECT_EQ(Crc32cCombine(a, b, len - cut), Crc32c(data.data(), len));
    EXPECT_EQ(Crc32cCombineWith(Crc32cShiftOperator(len - cut), a, b),
              Crc32c(data.data(), len));
  }
  // Many pieces folded left to right, one reused operator per piece length.
  for (size_t block : {size_t{1}, size_t{512}, size_t{4096}, size_t{65536}}) {
    const size_t len = data.size() - 1000;  // a short last piece
    const uint32_t shift = Crc32cShiftOperator(block);
    uint32_t crc = 0;
    for (size_t off = 0; off < len; off += block) {
      const size_t n = std::min(block, len - off);
      const uint32_t piece = Crc32c(data.data() + off, n);
      crc = n == block ? Crc32cCombineWith(shift, crc, piece)
                       : Crc32cCombine(crc, piece, n);
    }
    EXPECT_EQ(crc, Crc32c(data.data(), len)) << "block " << block;
  }
  // Known vector: "1234" + "56789".
  const char* s = "123456789";
  EXPECT_EQ(Crc32cCombine(Crc32c(s, 4), Crc32c(s + 4, 5), 5), 0xE3069283u);
  EXPECT_EQ(Crc32cCombine(Crc32c(s, 9), 0, 0), 0xE3069283u);
  EXPECT_EQ(Crc32cCombine(0, Crc32c(s, 9), 9), 0xE3069283u);
}

}  // namespace
}  // namespace stripefs::ec

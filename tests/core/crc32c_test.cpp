// CRC32C against the RFC 3720 (iSCSI) vectors and a bit-at-a-time reference, for the
// CPU-instruction path and the table path alike.
#include "adamant/core/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace adamant {
namespace {

// The definition itself: one bit at a time, reflected Castagnoli polynomial.
std::uint32_t crc32c_bitwise(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}

using Crc = std::uint32_t (*)(const void*, std::size_t, std::uint32_t);

class Crc32cPaths : public ::testing::TestWithParam<Crc> {};

TEST_P(Crc32cPaths, Rfc3720Vectors) {
  const Crc crc = GetParam();
  EXPECT_EQ(crc("123456789", 9, 0), 0xe3069283u);
  std::vector<std::uint8_t> bytes(32, 0);
  EXPECT_EQ(crc(bytes.data(), bytes.size(), 0), 0x8a9136aau);
  bytes.assign(32, 0xff);
  EXPECT_EQ(crc(bytes.data(), bytes.size(), 0), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(crc(bytes.data(), bytes.size(), 0), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) bytes[i] = static_cast<std::uint8_t>(31 - i);
  EXPECT_EQ(crc(bytes.data(), bytes.size(), 0), 0x113fdb5cu);
  EXPECT_EQ(crc(bytes.data(), 0, 0), 0u);
}

TEST_P(Crc32cPaths, MatchesTheBitwiseDefinitionAtAnyLengthAndAlignment) {
  const Crc crc = GetParam();
  std::mt19937 rng(7);
  std::vector<std::uint8_t> buffer(4096 + 16);
  for (auto& b : buffer) b = static_cast<std::uint8_t>(rng());
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t start = rng() % 16, length = rng() % 4096;
    const std::uint8_t* p = buffer.data() + start;
    ASSERT_EQ(crc(p, length, 0), crc32c_bitwise(p, length)) << "start " << start << ", length " << length;
    // Chaining: the CRC of a whole is that of its second part continued from the first's.
    const std::size_t split = length == 0 ? 0 : rng() % length;
    ASSERT_EQ(crc(p + split, length - split, crc(p, split, 0)), crc32c_bitwise(p, length));
  }
}

INSTANTIATE_TEST_SUITE_P(CpuInstructionOrTable, Crc32cPaths, ::testing::Values(&crc32c, &crc32c_portable));

TEST(Crc32c, ThisMachine) {
#if defined(__x86_64__)
  // Every x86-64 CPU of the last fifteen years has SSE4.2; CI and the GPU hosts do.
  EXPECT_TRUE(crc32c_uses_cpu_instruction());
#endif
}

}  // namespace
}  // namespace adamant

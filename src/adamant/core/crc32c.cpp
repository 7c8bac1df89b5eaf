#include "adamant/core/crc32c.h"

#include <array>
#include <cstring>

namespace adamant {

namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78u;  // Castagnoli, reflected

// Slice-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

Tables make_tables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
  }
  return t;
}

const Tables& tables() {
  static const Tables t = make_tables();
  return t;
}

std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);  // x86-64 and aarch64 Linux are little-endian
  return v;
}

#if defined(__x86_64__)
// The SSE4.2 instruction computes the same reflected Castagnoli CRC, 8 bytes at a time.
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(const unsigned char* p, std::size_t n, std::uint32_t crc) {
  std::uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) c = __builtin_ia32_crc32di(c, load_le64(p));
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}

bool cpu_has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

std::uint32_t crc32c_portable(const void* data, std::size_t bytes, std::uint32_t crc) {
  const Tables& t = tables();
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    const std::uint64_t v = load_le64(p) ^ c;
    c = t[7][v & 0xffu] ^ t[6][(v >> 8) & 0xffu] ^ t[5][(v >> 16) & 0xffu] ^ t[4][(v >> 24) & 0xffu] ^
        t[3][(v >> 32) & 0xffu] ^ t[2][(v >> 40) & 0xffu] ^ t[1][(v >> 48) & 0xffu] ^ t[0][v >> 56];
  }
  for (; bytes > 0; --bytes, ++p) c = t[0][(c ^ *p) & 0xffu] ^ (c >> 8);
  return ~c;
}

bool crc32c_uses_cpu_instruction() {
#if defined(__x86_64__)
  return cpu_has_sse42();
#else
  return false;
#endif
}

std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc) {
#if defined(__x86_64__)
  if (cpu_has_sse42()) return crc32c_sse42(static_cast<const unsigned char*>(data), bytes, crc);
#endif
  return crc32c_portable(data, bytes, crc);
}

}  // namespace adamant

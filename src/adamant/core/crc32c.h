#pragma once
// CRC32C (Castagnoli), the checksum of every checkpoint tensor. Checkpoints of large
// models hold tens of GB per rank, so it runs on the CPU's CRC32 instruction where
// there is one (x86-64 SSE4.2: about 10x the table-driven rate) and on a slice-by-8
// table otherwise; both give the same values.
#include <cstddef>
#include <cstdint>

namespace adamant {

// CRC32C of `bytes` bytes, continuing from `crc` (the CRC32C of what came before; 0 to start):
// crc32c(ab) == crc32c(b, crc32c(a)).
std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc = 0);

// The table-driven computation alone (what crc32c falls back to), for tests and benchmarks.
std::uint32_t crc32c_portable(const void* data, std::size_t bytes, std::uint32_t crc = 0);
// Whether crc32c uses the CPU instruction on this machine.
bool crc32c_uses_cpu_instruction();

}  // namespace adamant

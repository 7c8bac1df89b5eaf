// CRC32C throughput on this CPU: the CPU-instruction path that checkpoints use, the
// slice-by-8 table it falls back to, and, as the ceiling, one plain read of the same
// bytes (a 64-bit sum). 1 GiB buffer, median of 5 passes after one warm-up.
//   build/bench/crc32c_bench
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "adamant/core/crc32c.h"

namespace {

double median_seconds(const std::function<void()>& run) {
  run();
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  const std::size_t bytes = std::size_t{1} << 30;
  std::vector<std::uint64_t> buffer(bytes / sizeof(std::uint64_t));
  std::mt19937_64 rng(1);
  for (auto& v : buffer) v = rng();
  volatile std::uint64_t sink = 0;
  const double read = median_seconds([&] {
    std::uint64_t sum = 0;
    for (const std::uint64_t v : buffer) sum += v;
    sink = sum;
  });
  const double hardware = median_seconds([&] { sink = adamant::crc32c(buffer.data(), bytes); });
  const double table = median_seconds([&] { sink = adamant::crc32c_portable(buffer.data(), bytes); });
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("CRC32C over 1 GiB, median of 5 (CPU instruction used: %s)\n",
              adamant::crc32c_uses_cpu_instruction() ? "yes" : "no");
  std::printf("  read ceiling (64-bit sum)  %6.2f GB/s\n", gb / read);
  std::printf("  crc32c (checkpoints)       %6.2f GB/s  (%.0f%% of the read ceiling, %.1fx the table)\n", gb / hardware,
              100.0 * read / hardware, table / hardware);
  std::printf("  crc32c_portable (table)    %6.2f GB/s\n", gb / table);
  return 0;
}

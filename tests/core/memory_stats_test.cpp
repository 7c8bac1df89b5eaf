// The per-device allocation counters (core/memory_stats.h) against the sizes of
// the Buffers a test allocates and frees, and CPU event timing against the host clock.
#include "adamant/core/memory_stats.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/stream.h"

namespace adamant {
namespace {

const Device kCpu = Device::cpu();

TEST(MemoryStats, CountsBuffersAndTheirHighWaterMark) {
  const std::size_t base = allocation_stats(kCpu).in_use_bytes;
  reset_allocation_peak(kCpu);
  EXPECT_EQ(allocation_stats(kCpu).peak_bytes, base);
  {
    const Buffer a(1000, kCpu);
    EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 1000);
    {
      const Buffer b(5000, kCpu);
      EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 6000);
      EXPECT_EQ(allocation_stats(kCpu).peak_bytes, base + 6000);
    }
    EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 1000);
    EXPECT_EQ(allocation_stats(kCpu).peak_bytes, base + 6000);  // the mark stays
    const Buffer c(3000, kCpu);
    EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 4000);
    EXPECT_EQ(allocation_stats(kCpu).peak_bytes, base + 6000);
    const Buffer d(4000, kCpu);
    EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 8000);
    EXPECT_EQ(allocation_stats(kCpu).peak_bytes, base + 8000);
    const Buffer empty(0, kCpu);
    EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 8000);
  }
  EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base);
  EXPECT_EQ(allocation_stats(kCpu).peak_bytes, base + 8000);
  reset_allocation_peak(kCpu);
  EXPECT_EQ(allocation_stats(kCpu).peak_bytes, base);
}

TEST(MemoryStats, MovesTransferOwnershipWithoutCountingTwice) {
  const std::size_t base = allocation_stats(kCpu).in_use_bytes;
  Buffer a(700, kCpu);
  Buffer b(std::move(a));
  EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 700);
  b = Buffer(300, kCpu);  // frees the 700 bytes
  EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 300);
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base + 300);
  c = Buffer();
  EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, base);
}

TEST(MemoryStats, DevicesAreCountedApart) {
  const Device gpu3 = Device::cuda(3);
  const AllocationStats cpu_before = allocation_stats(kCpu);
  const AllocationStats before = allocation_stats(gpu3);
  note_allocation(gpu3, 4096);
  EXPECT_EQ(allocation_stats(gpu3).in_use_bytes, before.in_use_bytes + 4096);
  EXPECT_EQ(allocation_stats(Device::cuda(2)).in_use_bytes, 0u);
  EXPECT_EQ(allocation_stats(kCpu).in_use_bytes, cpu_before.in_use_bytes);
  note_release(gpu3, 4096);
  EXPECT_EQ(allocation_stats(gpu3).in_use_bytes, before.in_use_bytes);
  EXPECT_GE(allocation_stats(gpu3).peak_bytes, before.in_use_bytes + 4096);
  // A device beyond the tracked range is ignored rather than corrupting another's counters.
  note_allocation(Device::cuda(kMaxTrackedCudaDevices), 1);
  EXPECT_EQ(allocation_stats(Device::cuda(kMaxTrackedCudaDevices)).in_use_bytes, 0u);
}

TEST(MemoryStats, ConcurrentAllocationsBalance) {
  const std::size_t base = allocation_stats(kCpu).in_use_bytes;
  reset_allocation_peak(kCpu);
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  constexpr std::size_t kBytes = 512;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < kRounds; ++i) {
        const Buffer b(kBytes, kCpu);
      }
    });
  }
  for (auto& t : threads) t.join();
  const AllocationStats after = allocation_stats(kCpu);
  EXPECT_EQ(after.in_use_bytes, base);
  EXPECT_GE(after.peak_bytes, base + kBytes);
  EXPECT_LE(after.peak_bytes, base + kThreads * kBytes);
}

TEST(CpuEvent, ElapsedTimeIsHostTimeBetweenRecords) {
  const Stream cpu;
  Event start(kCpu), stop(kCpu);
  start.record(cpu);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  stop.record(cpu);
  EXPECT_TRUE(start.done());
  EXPECT_TRUE(stop.done());
  const float ms = stop.elapsed_ms_since(start);
  EXPECT_GE(ms, 30.0f);  // sleep_for waits at least that long on the steady clock
  EXPECT_LT(ms, 60000.0f);
  EXPECT_FLOAT_EQ(start.elapsed_ms_since(stop), -ms);
  const Event moved(std::move(stop));  // the timestamp moves with the event
  EXPECT_FLOAT_EQ(moved.elapsed_ms_since(start), ms);
}

}  // namespace
}  // namespace adamant

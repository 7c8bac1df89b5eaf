#pragma once
// What the CUDA benchmarks share: a CUDA error ends the program with the call that
// failed, an owning device allocation, event timing of the GPU's work alone (the sorted
// times of runs after three warm-ups) and reproducible random fills. Only for bench/*.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace adamant::bench {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// Owning device allocation.
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t bytes) : bytes_(bytes) { check(cudaMalloc(&data_, bytes), "cudaMalloc"); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Keeps the GPU busy for about `nanoseconds`, so that the host has issued a run's launches
// before the GPU reaches its start event: the time measured is then the GPU's alone, without
// the host's launch latency (a framework's peer, bench/torch_*_peer.py, does the same).
static __global__ void hold_gpu_kernel(std::uint64_t nanoseconds) {
  std::uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    std::uint64_t now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= nanoseconds) return;
  }
}

// Owning CUDA event pair: the time of the work `run` enqueues on the default stream.
class EventPair {
 public:
  EventPair() {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  static constexpr std::uint64_t kHoldNanoseconds = 200'000;  // far above any run's launch time
  float time_ms(const std::function<void()>& run) {
    hold_gpu_kernel<<<1, 1>>>(kHoldNanoseconds);
    check(cudaEventRecord(start_), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// `reps` timings of `run` after three warm-up runs, fastest first. `prepare`, when
// given, runs untimed before each run (to restore inputs a run overwrites).
inline std::vector<float> sorted_times_ms(int reps, const std::function<void()>& run,
                                          const std::function<void()>& prepare = {}) {
  EventPair events;
  for (int i = 0; i < 3; ++i) {
    if (prepare) prepare();
    run();
  }
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    if (prepare) prepare();
    times.push_back(events.time_ms(run));
  }
  std::sort(times.begin(), times.end());
  return times;
}

inline double median_ms(int reps, const std::function<void()>& run, const std::function<void()>& prepare = {}) {
  const std::vector<float> times = sorted_times_ms(reps, run, prepare);
  return times[times.size() / 2];
}

// A value uniform in [0, 1) from a hash of the index: random, reproducible inputs.
__device__ __forceinline__ float hashed_unit(std::int64_t i, std::uint64_t seed) {
  std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull + seed;
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// The same value spread over [-1, 1) (the scaling by 2 is exact).
__device__ __forceinline__ float hashed_uniform(std::int64_t i, std::uint64_t seed) {
  return 2.0f * hashed_unit(i, seed) - 1.0f;
}

}  // namespace adamant::bench

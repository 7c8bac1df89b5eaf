#include "adamant/train/memory_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "adamant/core/cuda_runtime.h"
#include "adamant/core/memory_stats.h"
#include "adamant/core/tensor.h"

namespace adamant::train {

MemoryWatch::MemoryWatch(Device device) : device_(device) {
  reset_allocation_peak(device_);
  sample();
}

void MemoryWatch::sample() {
  if (!device_.is_cuda()) return;
  device_in_use_peak_ = std::max(device_in_use_peak_, static_cast<double>(cuda::device_memory_in_use(device_.index)));
}

MemoryReport MemoryWatch::report(comm::Communicator& group) const {
  const double allocated = static_cast<double>(allocation_stats(device_).peak_bytes);
  // The minimum is the maximum of the negated values: one all-reduce for both.
  double values[4] = {allocated, device_in_use_peak_, -allocated, -device_in_use_peak_};
  group.all_reduce(Tensor::flat(values, DType::f64, Device::cpu(), 4), comm::ReduceOp::max);
  MemoryReport r;
  r.gpu = device_.is_cuda();
  r.allocated_peak = {values[0], -values[2]};
  r.device_in_use_peak = {values[1], -values[3]};
  return r;
}

namespace {

std::string bytes_text(double bytes) {
  constexpr double MiB = 1024.0 * 1024.0;
  if (bytes < 1024.0 * MiB) return fmt::format("{:.1f} MiB", bytes / MiB);
  return fmt::format("{:.2f} GiB", bytes / (1024.0 * MiB));
}

// One figure when the ranks agree to the precision shown (they differ by a few bytes of shard padding).
std::string spread_text(const RankSpread& s) {
  const std::string max = bytes_text(s.max), min = bytes_text(s.min);
  if (max == min) return max;
  return max + " max, " + min + " min over ranks";
}

}  // namespace

std::string format_memory(const MemoryReport& report) {
  std::string text = "allocated " + spread_text(report.allocated_peak);
  if (report.gpu) text += ", device in use " + spread_text(report.device_in_use_peak) + " (cudaMemGetInfo)";
  return text;
}

}  // namespace adamant::train

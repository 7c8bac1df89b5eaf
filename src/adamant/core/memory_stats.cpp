#include "adamant/core/memory_stats.h"

#include <array>
#include <atomic>

namespace adamant {

namespace {

struct Counters {
  std::atomic<std::size_t> in_use{0};
  std::atomic<std::size_t> peak{0};
};

// One slot for the host, one per GPU.
std::array<Counters, 1 + kMaxTrackedCudaDevices>& all_counters() {
  static std::array<Counters, 1 + kMaxTrackedCudaDevices> counters;
  return counters;
}

Counters* counters_of(Device device) {
  if (device.is_cpu()) return &all_counters()[0];
  if (device.index < 0 || device.index >= kMaxTrackedCudaDevices) return nullptr;
  return &all_counters()[1 + static_cast<std::size_t>(device.index)];
}

void raise_peak(Counters& c, std::size_t value) {
  std::size_t peak = c.peak.load(std::memory_order_relaxed);
  while (peak < value && !c.peak.compare_exchange_weak(peak, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

void note_allocation(Device device, std::size_t bytes) noexcept {
  Counters* c = counters_of(device);
  if (c == nullptr) return;
  const std::size_t now = c->in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  raise_peak(*c, now);
}

void note_release(Device device, std::size_t bytes) noexcept {
  Counters* c = counters_of(device);
  if (c == nullptr) return;
  c->in_use.fetch_sub(bytes, std::memory_order_relaxed);
}

AllocationStats allocation_stats(Device device) {
  const Counters* c = counters_of(device);
  if (c == nullptr) return {};
  return {c->in_use.load(std::memory_order_relaxed), c->peak.load(std::memory_order_relaxed)};
}

void reset_allocation_peak(Device device) {
  Counters* c = counters_of(device);
  if (c == nullptr) return;
  c->peak.store(c->in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
  raise_peak(*c, c->in_use.load(std::memory_order_relaxed));  // an allocation may have landed in between
}

}  // namespace adamant

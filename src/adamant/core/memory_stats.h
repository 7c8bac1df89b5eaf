#pragma once
// Bytes of device memory the program itself holds, per device, with a high-water
// mark: every Buffer and every kernel workspace reports its allocations here.
//
// This is process-wide state on purpose, like PyTorch's allocator statistics:
// memory is allocated in several layers (core's buffers, the CUDA kernels'
// workspaces) that share nothing else, and a run reports the total. The counters
// are atomics, so any thread may allocate.
#include <cstddef>

#include "adamant/core/device.h"

namespace adamant {

struct AllocationStats {
  std::size_t in_use_bytes = 0;  // allocated now
  std::size_t peak_bytes = 0;    // most allocated at once since the start or the last reset_allocation_peak
};

// Called by whoever allocates or frees device (or host) memory for the program's data.
// Devices beyond kMaxTrackedCudaDevices are not counted.
void note_allocation(Device device, std::size_t bytes) noexcept;
void note_release(Device device, std::size_t bytes) noexcept;

AllocationStats allocation_stats(Device device);
// Starts a new high-water mark at the bytes in use now (e.g. at the start of a run).
void reset_allocation_peak(Device device);

inline constexpr int kMaxTrackedCudaDevices = 64;

}  // namespace adamant

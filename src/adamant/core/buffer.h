#pragma once
// Owning, aligned, zero-initialised storage on one device. All weights, gradients
// and optimizer state live in a few of these; everything else is a view (Tensor).
// Each one counts its requested bytes in the device's allocation statistics
// (memory_stats.h) while it lives.
#include <cstddef>

#include "adamant/core/device.h"

namespace adamant {

class Buffer {
 public:
  static constexpr std::size_t kAlignment = 256;  // bytes; covers 128-bit loads and 128-byte shards

  Buffer() = default;
  Buffer(std::size_t bytes, Device device);
  // Host memory that `peer`'s streams copy into asynchronously: page-locked when `peer` is a GPU
  // (a copy into pageable memory would make the host wait for the stream), plain host memory
  // when it is the CPU.
  static Buffer host_for(std::size_t bytes, Device peer);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool empty() const { return bytes_ == 0; }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_{};
  bool page_locked_ = false;
};

// Copies between any two devices (host<->device, device<->device, host<->host).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);

}  // namespace adamant

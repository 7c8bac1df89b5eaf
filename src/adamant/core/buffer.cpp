#include "adamant/core/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "adamant/core/cuda_runtime.h"
#include "adamant/core/error.h"
#include "adamant/core/memory_stats.h"

namespace adamant {

Buffer::Buffer(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    data_ = std::aligned_alloc(kAlignment, rounded);
    if (data_ == nullptr) fail("out of host memory allocating {} bytes", bytes);
    std::memset(data_, 0, rounded);
  } else {
    data_ = cuda::malloc_zeroed(bytes, device.index);
  }
  note_allocation(device, bytes);
}

Buffer Buffer::host_for(std::size_t bytes, Device peer) {
  if (peer.is_cpu() || bytes == 0) return Buffer(bytes, Device::cpu());
  Buffer b;
  b.data_ = cuda::host_alloc_pinned(bytes);
  b.bytes_ = bytes;
  b.device_ = Device::cpu();
  b.page_locked_ = true;
  note_allocation(b.device_, bytes);
  return b;
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_),
      page_locked_(std::exchange(other.page_locked_, false)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
    page_locked_ = std::exchange(other.page_locked_, false);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (data_ == nullptr) return;
  note_release(device_, bytes_);
  if (page_locked_) {
    cuda::host_free_pinned(data_);
  } else if (device_.is_cpu()) {
    std::free(data_);
  } else {
    cuda::free(data_, device_.index);
  }
  data_ = nullptr;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
  } else {
    cuda::copy(dst, src, bytes);
  }
}

}  // namespace adamant

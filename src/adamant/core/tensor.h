#pragma once
// A non-owning view: pointer, element type, device and shape. Views never allocate.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>

#include "adamant/core/buffer.h"
#include "adamant/core/dtype.h"
#include "adamant/core/error.h"

namespace adamant {

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<std::uint16_t>() {
  return DType::u16;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::u8;
}

struct Tensor {
  static constexpr int kMaxDims = 4;

  void* data = nullptr;
  DType dtype = DType::f32;
  Device device{};
  int ndim = 1;
  std::array<std::int64_t, kMaxDims> shape{0, 1, 1, 1};

  Tensor() = default;
  Tensor(void* data, DType dtype, Device device, std::initializer_list<std::int64_t> dims)
      : data(data), dtype(dtype), device(device), ndim(static_cast<int>(dims.size())) {
    ADAMANT_CHECK(dims.size() >= 1 && dims.size() <= kMaxDims, "Tensor: {} dimensions, at most {}", dims.size(),
                  kMaxDims);
    int i = 0;
    for (auto d : dims) shape[i++] = d;
  }
  // A flat view of `numel` elements.
  static Tensor flat(void* data, DType dtype, Device device, std::size_t numel) {
    return Tensor(data, dtype, device, {static_cast<std::int64_t>(numel)});
  }
  static Tensor of(Buffer& buffer, DType dtype) {
    return flat(buffer.data(), dtype, buffer.device(), buffer.bytes() / dtype_size(dtype));
  }

  std::size_t numel() const {
    std::size_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= static_cast<std::size_t>(shape[i]);
    return n;
  }
  std::size_t bytes() const { return numel() * dtype_size(dtype); }
  std::int64_t dim(int i) const { return shape[i]; }

  // Elements [offset, offset + count) of the flattened view.
  Tensor slice(std::size_t offset, std::size_t count) const {
    ADAMANT_CHECK(offset + count <= numel(), "Tensor::slice [{}, {}) out of range {}", offset, offset + count, numel());
    return flat(static_cast<char*>(data) + offset * dtype_size(dtype), dtype, device, count);
  }

  template <typename T>
  T* ptr() const {
    if constexpr (std::is_same_v<T, std::uint16_t>) {
      ADAMANT_CHECK(dtype_size(dtype) == 2, "Tensor of {} viewed as 16-bit", dtype_name(dtype));
    } else {
      ADAMANT_CHECK(dtype == dtype_of<T>(), "Tensor of {} viewed as {}", dtype_name(dtype), dtype_name(dtype_of<T>()));
    }
    return static_cast<T*>(data);
  }
  template <typename T>
  std::span<T> span() const {
    ADAMANT_CHECK(device.is_cpu(), "Tensor::span on {} memory", device.str());
    return {ptr<T>(), numel()};
  }
};

}  // namespace adamant

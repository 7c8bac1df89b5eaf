#pragma once
// Helpers of the CPU kernels (kernels/cpu/), whose entry points each public header
// declares in its namespace cpu. Shapes, dtypes and devices were checked by the
// dispatcher (kernels/dispatch.h); these only compute.
// Every loop that OpenMP splits writes disjoint outputs and sums in a fixed order,
// so results are bitwise reproducible run to run.
#include <cstdint>

#include "adamant/kernels/adam.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/embedding.h"
#include "adamant/kernels/flash_attention.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/reduce.h"
#include "adamant/kernels/residual.h"

namespace adamant::kernels::cpu {

// Loops with less work than this (elements, or multiply-adds) stay on one thread:
// waking a team costs more than it saves, especially on a busy machine.
constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 15;

// Row-major GEMM on raw pointers: CBLAS when available, else gemm_blocked.
template <typename T>
void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, const T* b, T beta, T* c);
// The portable loop version, always compiled so that tests cover it in every build.
template <typename T>
void gemm_blocked(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                  const T* a, const T* b, T beta, T* c);

// The data of an optional operand, nullptr when it is empty (its dtype is then unset).
template <typename T>
T* optional_ptr(const Tensor& t) {
  return t.data == nullptr ? nullptr : t.ptr<T>();
}

// Calls fn.template operator()<T>() with T = float or double by the tensor's dtype.
template <typename Fn>
void with_float_type(const Tensor& t, Fn&& fn) {
  if (t.dtype == DType::f64) {
    fn.template operator()<double>();
  } else {
    fn.template operator()<float>();
  }
}

}  // namespace adamant::kernels::cpu

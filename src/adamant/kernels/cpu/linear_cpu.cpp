#include <algorithm>

#include "adamant/core/error.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

namespace {

// Column sums of x [rows, cols], each column summed in row order by one thread.
template <typename T>
void column_sums(const T* x, T* sums, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kColumnBlock = 64;
  const std::int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMinWork)
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t c0 = block * kColumnBlock;
    const std::int64_t c1 = std::min(cols, c0 + kColumnBlock);
    std::fill(sums + c0, sums + c1, T(0));
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * cols;
      for (std::int64_t c = c0; c < c1; ++c) sums[c] += row[c];
    }
  }
}

}  // namespace

void bias_grad(const Tensor& d_out, Tensor d_bias, std::int64_t rows, std::int64_t cols) {
  with_float_type(d_bias, [&]<typename T>() { column_sums<T>(d_out.ptr<T>(), d_bias.ptr<T>(), rows, cols); });
}

void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape) {
  with_float_type(out, [&]<typename T>() {
    const T* bias_data = optional_ptr<T>(bias);
    T* out_data = out.ptr<T>();
    if (bias_data != nullptr) {
      // Start from the bias and let the GEMM accumulate onto it: one pass fewer.
#pragma omp parallel for schedule(static) if (shape.rows * shape.out_features >= kParallelMinWork)
      for (std::int64_t r = 0; r < shape.rows; ++r) {
        std::copy(bias_data, bias_data + shape.out_features, out_data + r * shape.out_features);
      }
    }
    gemm<T>(Transpose::no, Transpose::yes, shape.rows, shape.out_features, shape.in_features, T(1), in.ptr<T>(),
            weight.ptr<T>(), bias_data != nullptr ? T(1) : T(0), out_data);
  });
}

void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, WeightGrad weight_grad, const Tensor& product) {
  with_float_type(d_out, [&]<typename T>() {
    if (d_in.data != nullptr) {
      gemm<T>(Transpose::no, Transpose::no, shape.rows, shape.in_features, shape.out_features, T(1), d_out.ptr<T>(),
              weight.ptr<T>(), T(0), d_in.ptr<T>());
    }
    if (d_weight.data == nullptr) return;
    const std::int64_t weight_numel = shape.out_features * shape.in_features;
    // Adding, the product is formed whole first: d_weight ends as the exact sum of its old
    // value and this gradient, as with a separate accumulation (BLAS with beta = 1 would add
    // each k-block on its own).
    const bool adds = weight_grad == WeightGrad::accumulate;
    if (adds) {
      ADAMANT_CHECK(product.dtype == d_weight.dtype && product.numel() >= static_cast<std::size_t>(weight_numel),
                    "linear_backward: the product scratch holds {} {} values; adding takes {} {}", product.numel(),
                    dtype_name(product.dtype), weight_numel, dtype_name(d_weight.dtype));
    }
    T* formed = adds ? product.ptr<T>() : d_weight.ptr<T>();
    gemm<T>(Transpose::yes, Transpose::no, shape.out_features, shape.in_features, shape.rows, T(1), d_out.ptr<T>(),
            in.ptr<T>(), T(0), formed);
    if (adds) {
      T* total = d_weight.ptr<T>();
#pragma omp parallel for schedule(static) if (weight_numel >= kParallelMinWork)
      for (std::int64_t i = 0; i < weight_numel; ++i) total[i] += formed[i];
    }
  });
  if (d_bias.data != nullptr) bias_grad(d_out, d_bias, shape.rows, shape.out_features);
}

}  // namespace adamant::kernels::cpu

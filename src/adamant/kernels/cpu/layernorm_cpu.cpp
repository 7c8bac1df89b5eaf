#include <algorithm>
#include <cmath>

#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape) {
  with_float_type(x, [&]<typename T>() {
    const T* x_data = x.ptr<T>();
    const T* w = weight.ptr<T>();
    const T* b = bias.ptr<T>();
    T* out_data = out.ptr<T>();
    T* mean_data = mean.ptr<T>();
    T* rstd_data = rstd.ptr<T>();
    const std::int64_t cols = shape.cols;
#pragma omp parallel for schedule(static) if (shape.rows * cols >= kParallelMinWork)
    for (std::int64_t r = 0; r < shape.rows; ++r) {
      const T* row = x_data + r * cols;
      T sum = 0;
      for (std::int64_t c = 0; c < cols; ++c) sum += row[c];
      const T row_mean = sum / static_cast<T>(cols);
      T squares = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const T centered = row[c] - row_mean;
        squares += centered * centered;
      }
      const T row_rstd = T(1) / std::sqrt(squares / static_cast<T>(cols) + static_cast<T>(epsilon));
      T* out_row = out_data + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) out_row[c] = (row[c] - row_mean) * row_rstd * w[c] + b[c];
      mean_data[r] = row_mean;
      rstd_data[r] = row_rstd;
    }
  });
}

void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape) {
  with_float_type(x, [&]<typename T>() {
    const T* dy = d_out.ptr<T>();
    const T* x_data = x.ptr<T>();
    const T* w = weight.ptr<T>();
    const T* mean_data = mean.ptr<T>();
    const T* rstd_data = rstd.ptr<T>();
    T* dx = d_x.ptr<T>();
    T* dw = d_weight.ptr<T>();
    T* db = d_bias.ptr<T>();
    const std::int64_t cols = shape.cols;
    const T inv_cols = T(1) / static_cast<T>(cols);
    // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w.
#pragma omp parallel for schedule(static) if (shape.rows * cols >= kParallelMinWork)
    for (std::int64_t r = 0; r < shape.rows; ++r) {
      const T* x_row = x_data + r * cols;
      const T* dy_row = dy + r * cols;
      const T row_mean = mean_data[r];
      const T row_rstd = rstd_data[r];
      T dxhat_sum = 0;
      T dxhat_xhat_sum = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const T xhat = (x_row[c] - row_mean) * row_rstd;
        const T dxhat = dy_row[c] * w[c];
        dxhat_sum += dxhat;
        dxhat_xhat_sum += dxhat * xhat;
      }
      const T dxhat_mean = dxhat_sum * inv_cols;
      const T dxhat_xhat_mean = dxhat_xhat_sum * inv_cols;
      T* dx_row = dx + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) {
        const T xhat = (x_row[c] - row_mean) * row_rstd;
        dx_row[c] += row_rstd * (dy_row[c] * w[c] - dxhat_mean - xhat * dxhat_xhat_mean);
      }
    }
    // Parameter gradients: each column block summed over rows in order by one thread.
    constexpr std::int64_t kColumnBlock = 32;
    const std::int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (shape.rows * cols >= kParallelMinWork)
    for (std::int64_t block = 0; block < blocks; ++block) {
      const std::int64_t c0 = block * kColumnBlock;
      const std::int64_t c1 = std::min(cols, c0 + kColumnBlock);
      std::fill(dw + c0, dw + c1, T(0));
      std::fill(db + c0, db + c1, T(0));
      for (std::int64_t r = 0; r < shape.rows; ++r) {
        const T* x_row = x_data + r * cols;
        const T* dy_row = dy + r * cols;
        const T row_mean = mean_data[r];
        const T row_rstd = rstd_data[r];
        for (std::int64_t c = c0; c < c1; ++c) {
          dw[c] += dy_row[c] * (x_row[c] - row_mean) * row_rstd;
          db[c] += dy_row[c];
        }
      }
    }
  });
}

}  // namespace adamant::kernels::cpu

#include <omp.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "adamant/kernels/cpu/model_kernels_cpu.h"
#ifdef ADAMANT_HAVE_CBLAS
#include <cblas.h>
#endif

namespace adamant::kernels::cpu {

namespace {

template <typename T>
void scale_rows(std::int64_t m, std::int64_t n, T beta, T* c) {
  const std::int64_t count = m * n;
  if (beta == T(0)) {
    std::fill(c, c + count, T(0));  // beta == 0 must not propagate NaN from c
  } else if (beta != T(1)) {
    for (std::int64_t i = 0; i < count; ++i) c[i] *= beta;
  }
}

}  // namespace

template <typename T>
void gemm_blocked(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                  const T* a, const T* b, T beta, T* c) {
  // Block over k so the rows of b that one output row touches stay in cache.
  constexpr std::int64_t kBlock = 64;
  const bool ta = transpose_a == Transpose::yes;
  const bool tb = transpose_b == Transpose::yes;
#pragma omp parallel for schedule(static) if (m * n * k >= kParallelMinWork)
  for (std::int64_t i = 0; i < m; ++i) {
    T* c_row = c + i * n;
    scale_rows<T>(1, n, beta, c_row);
    for (std::int64_t p0 = 0; p0 < k; p0 += kBlock) {
      const std::int64_t p1 = std::min(k, p0 + kBlock);
      if (!tb) {
        for (std::int64_t p = p0; p < p1; ++p) {
          const T a_ip = alpha * (ta ? a[p * m + i] : a[i * k + p]);
          const T* b_row = b + p * n;
          for (std::int64_t j = 0; j < n; ++j) c_row[j] += a_ip * b_row[j];
        }
      } else {
        for (std::int64_t j = 0; j < n; ++j) {
          const T* b_row = b + j * k;
          T sum = 0;
          for (std::int64_t p = p0; p < p1; ++p) sum += (ta ? a[p * m + i] : a[i * k + p]) * b_row[p];
          c_row[j] += alpha * sum;
        }
      }
    }
  }
}

#ifdef ADAMANT_HAVE_CBLAS
// OpenBLAS (when that is the BLAS) would start its own thread pool, which fights the
// OpenMP team for the cores (both spin while waiting). We split GEMMs across the
// OpenMP team instead and keep each BLAS call on its thread. Weak: other BLAS
// libraries lack the symbol and need nothing.
extern "C" void openblas_set_num_threads(int threads) __attribute__((weak));

namespace {

// y = alpha * b x + beta * y for b [n, k] (row-major), one output row of a GEMM against transposed
// weights: a matrix-vector product, which BLAS streams through memory without the packing that
// its GEMM does (a token-by-token decoding step is all such products).
template <typename T>
void blas_gemv(std::int64_t n, std::int64_t k, T alpha, const T* b, const T* x, T beta, T* y) {
  const auto ni = static_cast<int>(n), ki = static_cast<int>(k);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, ni, ki, alpha, b, ki, x, 1, beta, y, 1);
  } else {
    cblas_dgemv(CblasRowMajor, CblasNoTrans, ni, ki, alpha, b, ki, x, 1, beta, y, 1);
  }
}

template <typename T>
void blas_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
               const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  const auto op_a = ta ? CblasTrans : CblasNoTrans;
  const auto op_b = tb ? CblasTrans : CblasNoTrans;
  const auto mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, op_a, op_b, mi, ni, ki, alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
                c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, op_a, op_b, mi, ni, ki, alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
                c, static_cast<int>(ldc));
  }
}

}  // namespace
#endif

// Up to this many rows of `a`, a GEMM against transposed `b` (a layer's weights) runs as matrix-vector
// products.
constexpr std::int64_t kGemvRows = 4;

template <typename T>
void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, const T* b, T beta, T* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale_rows(m, n, beta, c);
    return;
  }
#ifdef ADAMANT_HAVE_CBLAS
  ADAMANT_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "gemm: {}x{}x{} exceeds the 32-bit BLAS interface", m, n,
                k);
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
  const bool ta = transpose_a == Transpose::yes;
  const bool tb = transpose_b == Transpose::yes;
  const std::int64_t lda = ta ? m : k, ldb = tb ? k : n;
  // Each thread takes a fixed slice of the longer output dimension (a multiple of 16
  // for the microkernels): disjoint outputs, same split every run.
  const bool split_rows = m >= n;
  const std::int64_t extent = split_rows ? m : n;
#pragma omp parallel if (m * n * k >= kParallelMinWork * 8)
  {
    const std::int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const std::int64_t per_thread = ((extent + threads - 1) / threads + 15) / 16 * 16;
    const std::int64_t begin = std::min(extent, thread * per_thread);
    const std::int64_t end = std::min(extent, begin + per_thread);
    if (begin < end) {
      if (split_rows) {
        const T* a_slice = ta ? a + begin : a + begin * k;
        blas_gemm<T>(ta, tb, end - begin, n, k, alpha, a_slice, lda, b, ldb, beta, c + begin * n, n);
      } else if (m <= kGemvRows && !ta && tb) {
        for (std::int64_t row = 0; row < m; ++row) {
          blas_gemv<T>(end - begin, k, alpha, b + begin * k, a + row * k, beta, c + row * n + begin);
        }
      } else {
        const T* b_slice = tb ? b + begin * k : b + begin;
        blas_gemm<T>(ta, tb, m, end - begin, k, alpha, a, lda, b_slice, ldb, beta, c + begin, n);
      }
    }
  }
#else
  gemm_blocked(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
#endif
}

template void gemm_blocked<float>(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                                  const float*, float, float*);
template void gemm_blocked<double>(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, double,
                                   const double*, const double*, double, double*);
template void gemm<float>(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                          const float*, float, float*);
template void gemm<double>(Transpose, Transpose, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                           const double*, double, double*);

void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c) {
  with_float_type(c, [&]<typename T>() {
    gemm<T>(transpose_a, transpose_b, m, n, k, static_cast<T>(alpha), a.ptr<T>(), b.ptr<T>(), static_cast<T>(beta),
            c.ptr<T>());
  });
}

}  // namespace adamant::kernels::cpu

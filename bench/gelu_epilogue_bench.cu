// Whether cuBLASLt's GELU epilogues would beat the model's MLP as it runs now (tanh GELU,
// model.openai_gelu, the form those epilogues compute). At GPT-3 126M's and 1.3B's MLP
// shapes, bf16 operands and output, fp32 accumulation, CUDA events, median of --reps:
//
//   forward   the up projection with the bias epilogue, then our GELU kernel (what the
//             model runs), against one product with GELU_AUX_BIAS (the GELU output, and the
//             pre-activation as its aux output for the backward);
//   backward  the down projection's data gradient, then our GELU backward summing the bias
//             gradient in fp32 as it writes (what the model runs), against one product with
//             DGELU_BGRAD (whose bias gradient cuBLASLt writes in the output's type, bf16),
//             and against DGELU followed by our fp32 column sums.
//
// Each cuBLASLt product takes the heuristics' first answer and, apart, the fastest of up to
// 8 candidates (what `adamant tune-matmul` would record). The epilogues' results are checked
// against the model's kernels on the same inputs (the largest difference relative to the
// largest value); a combination cuBLASLt has no algorithm for is reported as such.
//
//   gelu_epilogue_bench [--reps 20] [--model 126m|1.3b|both]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/cuda/column_sums.h"
#include "adamant/kernels/cuda/device_common.cuh"
#include "adamant/kernels/gelu_launchers.h"
#include "bench_flags.h"
#include "cuda_bench_util.cuh"

namespace {

using adamant::bench::check;
using adamant::bench::DeviceArray;
using adamant::bench::median_ms;
namespace cuda_kernels = adamant::kernels::cuda;

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "gelu_epilogue_bench: %s failed: %s\n", what, cublasLtGetStatusName(status));
    std::exit(1);
  }
}

__global__ void fill_bf16(std::uint16_t* out, std::int64_t n, float scale, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    out[i] = cuda_kernels::detail::f32_to_bf16_bits(scale * adamant::bench::hashed_uniform(i, seed));
  }
}

std::vector<float> download_bf16(const DeviceArray& a, std::int64_t n) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(n));
  check(cudaMemcpy(bits.data(), a.as<void>(), bits.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost), "download");
  std::vector<float> values(bits.size());
  std::transform(bits.begin(), bits.end(), values.begin(), adamant::bf16_to_f32);
  return values;
}

std::vector<float> download_f32(const DeviceArray& a, std::int64_t n) {
  std::vector<float> values(static_cast<std::size_t>(n));
  check(cudaMemcpy(values.data(), a.as<void>(), values.size() * sizeof(float), cudaMemcpyDeviceToHost), "download");
  return values;
}

// The largest |a - b| over the largest |b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double largest = 0, difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(b[i])));
    difference = std::max(difference, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return largest > 0 ? difference / largest : difference;
}

// Up to 8 of cuBLASLt's algorithms for a product, best first. (A plain array: nvcc 13 fails
// on a std::vector of cuBLASLt's structs in a CUDA source.)
struct Candidates {
  static constexpr int kMost = 8;
  cublasLtMatmulAlgo_t algorithms[kMost] = {};
  int count = 0;
};

// One column-major cuBLASLt product D[m, n] = op(A) op(B) (bf16 in and out, fp32
// accumulation) with an epilogue; its bias and aux pointers are set per run.
class Product {
 public:
  Product(cublasLtHandle_t handle, cublasOperation_t transa, std::uint64_t m, std::uint64_t n, std::uint64_t k,
          std::int64_t lda, std::int64_t ldb, cublasLtEpilogue_t epilogue, cudaDataType_t bias_type)
      : handle_(handle), epilogue_(epilogue) {
    check_lt(cublasLtMatmulDescCreate(&description_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t none = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, transa);
    set(CUBLASLT_MATMUL_DESC_TRANSB, none);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    if (uses_bias()) set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<std::int32_t>(bias_type));
    if (uses_aux()) set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(m));
    check_lt(
        cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, transa == CUBLAS_OP_N ? m : k, transa == CUBLAS_OP_N ? k : m, lda),
        "cublasLtMatrixLayoutCreate");
    check_lt(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, k, n, ldb), "cublasLtMatrixLayoutCreate");
    check_lt(cublasLtMatrixLayoutCreate(&d_, CUDA_R_16BF, m, n, static_cast<std::int64_t>(m)),
             "cublasLtMatrixLayoutCreate");
  }
  ~Product() {
    cublasLtMatrixLayoutDestroy(d_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatmulDescDestroy(description_);
  }
  Product(const Product&) = delete;
  Product& operator=(const Product&) = delete;

  // The heuristics' answers for these pointers, best first (the first is what the model runs
  // without a recorded table); none when cuBLASLt has none.
  Candidates candidates(void* bias, void* aux, std::size_t workspace_bytes) {
    set_pointers(bias, aux);
    cublasLtMatmulPreference_t preference = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t bytes = workspace_bytes;
    check_lt(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                  sizeof(bytes)),
             "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t results[Candidates::kMost] = {};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, description_, a_, b_, d_, d_, preference,
                                                                 Candidates::kMost, results, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    Candidates out;
    if (status != CUBLAS_STATUS_SUCCESS) return out;
    for (int i = 0; i < found; ++i) {
      if (results[i].state == CUBLAS_STATUS_SUCCESS) out.algorithms[out.count++] = results[i].algo;
    }
    return out;
  }

  void run(const cublasLtMatmulAlgo_t& algorithm, const void* a, const void* b, void* d, void* bias, void* aux,
           const DeviceArray& workspace) {
    set_pointers(bias, aux);
    const float alpha = 1.0f, beta = 0.0f;
    check_lt(cublasLtMatmul(handle_, description_, &alpha, a, a_, b, b_, &beta, d, d_, d, d_, &algorithm,
                            workspace.as<void>(), workspace.bytes(), nullptr),
             "cublasLtMatmul");
  }

 private:
  template <typename Value>
  void set(cublasLtMatmulDescAttributes_t attribute, const Value& value) {
    check_lt(cublasLtMatmulDescSetAttribute(description_, attribute, &value, sizeof(value)),
             "cublasLtMatmulDescSetAttribute");
  }
  bool uses_bias() const {
    return epilogue_ == CUBLASLT_EPILOGUE_BIAS || epilogue_ == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
           epilogue_ == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  }
  bool uses_aux() const {
    return epilogue_ == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue_ == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
           epilogue_ == CUBLASLT_EPILOGUE_DGELU;
  }
  void set_pointers(void* bias, void* aux) {
    if (uses_bias()) {
      check_lt(cublasLtMatmulDescSetAttribute(description_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
               "bias pointer");
    }
    if (uses_aux()) {
      check_lt(
          cublasLtMatmulDescSetAttribute(description_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)),
          "aux pointer");
    }
  }

  cublasLtHandle_t handle_;
  cublasLtEpilogue_t epilogue_;
  cublasLtMatmulDesc_t description_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
};

struct Shape {
  const char* name;
  std::int64_t rows, hidden, ffn, layers;
};

// The heuristics' first answer's time and the fastest candidate's; negative when cuBLASLt
// has no algorithm. `after` runs after each product, inside the timing.
struct Timed {
  double first_ms = -1, best_ms = -1;
};

Timed time_product(Product& product, int reps, void* bias, void* aux, const DeviceArray& workspace,
                   const std::function<void(const cublasLtMatmulAlgo_t&)>& run, const std::function<void()>& after) {
  Timed timed;
  const Candidates candidates = product.candidates(bias, aux, workspace.bytes());
  for (int i = 0; i < candidates.count; ++i) {
    const double ms = median_ms(reps, [&] {
      run(candidates.algorithms[i]);
      after();
    });
    if (i == 0) timed.first_ms = ms;
    timed.best_ms = timed.best_ms < 0 ? ms : std::min(timed.best_ms, ms);
  }
  return timed;
}

void report(const char* what, const Timed& timed) {
  if (timed.first_ms < 0) {
    std::printf("  %-58s no algorithm\n", what);
    return;
  }
  std::printf("  %-58s %8.3f ms  (fastest candidate %8.3f ms)\n", what, timed.first_ms, timed.best_ms);
}

void bench_shape(const Shape& s, int reps, cublasLtHandle_t handle, int multiprocessors) {
  const std::int64_t rows = s.rows, C = s.hidden, F = s.ffn, n = rows * F;
  std::printf("%s: %lld rows, hidden %lld, ffn %lld (%lld layers)\n", s.name, static_cast<long long>(rows),
              static_cast<long long>(C), static_cast<long long>(F), static_cast<long long>(s.layers));
  DeviceArray x(rows * C * 2), w1(F * C * 2), b1(F * 2), w2(C * F * 2), d_out(rows * C * 2);
  DeviceArray pre(n * 2), act(n * 2), pre_epilogue(n * 2), act_epilogue(n * 2), d_act(n * 2), d_pre(n * 2),
      d_pre_epilogue(n * 2);
  DeviceArray bias_grad(F * 4), bias_grad_bf16(F * 2), bias_grad_sums(F * 4);
  DeviceArray workspace(std::size_t{32} << 20), scratch(std::size_t{32} << 20);
  const int blocks = multiprocessors * 8;
  fill_bf16<<<blocks, 256>>>(x.as<std::uint16_t>(), rows * C, 1.0f, 1);
  fill_bf16<<<blocks, 256>>>(w1.as<std::uint16_t>(), F * C, 0.08f, 2);
  fill_bf16<<<blocks, 256>>>(b1.as<std::uint16_t>(), F, 0.1f, 3);
  fill_bf16<<<blocks, 256>>>(w2.as<std::uint16_t>(), C * F, 0.08f, 4);
  fill_bf16<<<blocks, 256>>>(d_out.as<std::uint16_t>(), rows * C, 0.01f, 5);
  check(cudaGetLastError(), "fill");
  const adamant::kernels::CudaLaunch launch{nullptr, multiprocessors, true};
  const adamant::kernels::ColumnSumsOut sums{bias_grad.as<float>(), F, scratch.as<float>(),
                                             static_cast<std::int64_t>(scratch.bytes() / sizeof(float))};

  // Row-major [rows, F] = x [rows, C] w1 [F, C]^T is column-major [F, rows] = w1^T-op x.
  Product up_bias(handle, CUBLAS_OP_T, F, rows, C, C, C, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF);
  Product up_gelu(handle, CUBLAS_OP_T, F, rows, C, C, C, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_16BF);
  // Row-major d_act [rows, F] = d_out [rows, C] w2 [C, F] is column-major [F, rows] = w2 d_out.
  Product down_plain(handle, CUBLAS_OP_N, F, rows, C, F, C, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_16BF);
  Product down_dgelu_bgrad(handle, CUBLAS_OP_N, F, rows, C, F, C, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_16BF);
  Product down_dgelu(handle, CUBLAS_OP_N, F, rows, C, F, C, CUBLASLT_EPILOGUE_DGELU, CUDA_R_16BF);
  const auto nothing = [] {};

  // Forward.
  const Timed model_forward = time_product(
      up_bias, reps, b1.as<void>(), nullptr, workspace,
      [&](const cublasLtMatmulAlgo_t& a) {
        up_bias.run(a, w1.as<void>(), x.as<void>(), pre.as<void>(), b1.as<void>(), nullptr, workspace);
      },
      [&] {
        check(static_cast<cudaError_t>(
                  cuda_kernels::gelu_forward(pre.as<std::uint16_t>(), act.as<std::uint16_t>(), n, true, launch)),
              "gelu_forward");
      });
  const Timed epilogue_forward = time_product(
      up_gelu, reps, b1.as<void>(), pre_epilogue.as<void>(), workspace,
      [&](const cublasLtMatmulAlgo_t& a) {
        up_gelu.run(a, w1.as<void>(), x.as<void>(), act_epilogue.as<void>(), b1.as<void>(), pre_epilogue.as<void>(),
                    workspace);
      },
      nothing);
  report("forward: bias product + our GELU (the model)", model_forward);
  report("forward: GELU_AUX_BIAS", epilogue_forward);
  if (epilogue_forward.first_ms >= 0) {
    check(cudaDeviceSynchronize(), "forward");
    std::printf("  GELU_AUX_BIAS against the model: output %.2e, aux against the pre-activations %.2e\n",
                relative_difference(download_bf16(act_epilogue, n), download_bf16(act, n)),
                relative_difference(download_bf16(pre_epilogue, n), download_bf16(pre, n)));
  }

  // Backward (the model's pre-activations as the GELU input).
  const Timed model_backward = time_product(
      down_plain, reps, nullptr, nullptr, workspace,
      [&](const cublasLtMatmulAlgo_t& a) {
        down_plain.run(a, w2.as<void>(), d_out.as<void>(), d_act.as<void>(), nullptr, nullptr, workspace);
      },
      [&] {
        check(static_cast<cudaError_t>(cuda_kernels::gelu_backward(d_act.as<std::uint16_t>(), pre.as<std::uint16_t>(),
                                                                   d_pre.as<std::uint16_t>(), nullptr, n, true, launch,
                                                                   sums)),
              "gelu_backward");
      });
  const Timed epilogue_backward = time_product(
      down_dgelu_bgrad, reps, bias_grad_bf16.as<void>(), pre.as<void>(), workspace,
      [&](const cublasLtMatmulAlgo_t& a) {
        down_dgelu_bgrad.run(a, w2.as<void>(), d_out.as<void>(), d_pre_epilogue.as<void>(), bias_grad_bf16.as<void>(),
                             pre.as<void>(), workspace);
      },
      nothing);
  report("backward: product + our GELU backward with fp32 bias sums (model)", model_backward);
  report("backward: DGELU_BGRAD (bf16 bias gradient)", epilogue_backward);
  if (epilogue_backward.first_ms >= 0) {
    check(cudaDeviceSynchronize(), "backward");
    std::printf("  DGELU_BGRAD against the model: d_pre %.2e, bias gradient %.2e\n",
                relative_difference(download_bf16(d_pre_epilogue, n), download_bf16(d_pre, n)),
                relative_difference(download_bf16(bias_grad_bf16, F), download_f32(bias_grad, F)));
  }
  const Timed dgelu_then_sums = time_product(
      down_dgelu, reps, nullptr, pre.as<void>(), workspace,
      [&](const cublasLtMatmulAlgo_t& a) {
        down_dgelu.run(a, w2.as<void>(), d_out.as<void>(), d_pre_epilogue.as<void>(), nullptr, pre.as<void>(),
                       workspace);
      },
      [&] {
        check(cuda_kernels::launchers::column_sums(
                  d_pre_epilogue.as<void>(), adamant::DType::bf16, rows, F, scratch.as<float>(),
                  static_cast<std::int64_t>(scratch.bytes() / sizeof(float)), bias_grad_sums.as<float>(), nullptr),
              "column_sums");
      });
  report("backward: DGELU + our fp32 column sums", dgelu_then_sums);
  if (dgelu_then_sums.first_ms >= 0) {
    check(cudaDeviceSynchronize(), "backward");
    std::printf("  DGELU + sums against the model: d_pre %.2e, bias gradient %.2e\n",
                relative_difference(download_bf16(d_pre_epilogue, n), download_bf16(d_pre, n)),
                relative_difference(download_f32(bias_grad_sums, F), download_f32(bias_grad, F)));
  }

  // What a step would gain per layer and in all, with the first answers.
  const auto gain = [&](const char* what, const Timed& model, const Timed& fused) {
    if (model.first_ms < 0 || fused.first_ms < 0) return;
    const double per_layer = model.first_ms - fused.first_ms;
    std::printf("  %-40s %+8.3f ms a layer, %+8.3f ms a step\n", what, per_layer,
                per_layer * static_cast<double>(s.layers));
  };
  gain("saved by GELU_AUX_BIAS:", model_forward, epilogue_forward);
  gain("saved by DGELU_BGRAD:", model_backward, epilogue_backward);
  gain("saved by DGELU + our sums:", model_backward, dgelu_then_sums);
}

}  // namespace

int main(int argc, char** argv) {
  const adamant::bench::BenchFlags flags(argc, argv, "gelu_epilogue_bench", "[--reps N] [--model 126m|1.3b|both]",
                                         {"--reps", "--model"});
  const int reps = flags.whole_number("--reps", 20, 1);
  const std::string model = flags.one_of("--model", "both", {"126m", "1.3b", "both"});
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  std::printf("device: %s, %d SMs; cuBLASLt %zu; median of %d\n", props.name, props.multiProcessorCount,
              cublasLtGetVersion(), reps);
  cublasLtHandle_t handle = nullptr;
  check_lt(cublasLtCreate(&handle), "cublasLtCreate");
  const Shape shapes[] = {{"GPT-3 126M, micro-batch 8", 8 * 2048, 768, 3072, 12},
                          {"GPT-3 1.3B, micro-batch 4", 4 * 2048, 2048, 8192, 24}};
  for (const Shape& s : shapes) {
    const bool small = s.hidden == 768;
    if (model == "both" || (model == "126m") == small) bench_shape(s, reps, handle, props.multiProcessorCount);
  }
  cublasLtDestroy(handle);
  return 0;
}

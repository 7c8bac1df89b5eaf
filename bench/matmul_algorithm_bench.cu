// How much the GEMMs of a GPT-3 step would gain from timing cuBLASLt's candidate
// algorithms instead of taking its first heuristic answer (what kernels/cuda/
// cublaslt_context_cuda.cpp does). For each GEMM of one transformer layer and of the
// classifier, in the layouts kernels/cuda/cublaslt_matmul_cuda.cpp gives cuBLASLt
// (bf16 operands, fp32 accumulation; fp32 output for weight gradients and logits),
// it asks for up to 16 algorithms, times each (CUDA events, 3 warm-up runs, median of
// --reps), and prints the first answer's time, the best one's, their ratio and their
// configurations, then the per-step totals (layer GEMMs x layers + classifier).
//
// With --no-split-k it asks only for algorithms that reduce over k inside the kernel
// (no split-K partial sums added by a second pass). With --weight-grad-bf16 the weight
// and embedding gradients are written as bf16 (beta 0) instead of added to fp32, as an
// autocast program computes them before casting to its fp32 gradients: what writing
// fp32 costs those GEMMs.
//
//   matmul_algorithm_bench [--reps 15] [--model 126m|1.3b] [--no-split-k] [--weight-grad-bf16]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_flags.h"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "matmul_algorithm_bench: %s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "matmul_algorithm_bench: %s failed: status %d\n", what, static_cast<int>(status));
    std::exit(1);
  }
}

// Owning device allocation, filled with small bf16 or fp32 values.
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t bytes) {
    check(cudaMalloc(&data_, bytes), "cudaMalloc");
    check(cudaMemset(data_, 0x3c, bytes), "cudaMemset");  // 0x3c3c: about 0.0115 in bf16
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

// One GEMM as cuBLASLt sees it (column-major): D[m, n] = op(A) op(B) + beta D.
struct Gemm {
  std::string name;
  int per_step = 1;  // how many of it a step runs (per layer: times the layer count)
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
  std::uint64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0;
  cudaDataType_t c_type = CUDA_R_16BF;
  float beta = 0.0f;
};

struct Timing {
  float first_ms = 0;
  float best_ms = 0;
  int best_index = 0;
  int candidates = 0;
  std::string first_config;
  std::string best_config;
};

// An algorithm's configuration: kernel id, tile, stages, split-K count and reduction
// scheme, CTA swizzling, cluster shape (cuBLASLt's enum values).
std::string describe(const cublasLtMatmulAlgo_t& algo) {
  auto get = [&]<typename T>(cublasLtMatmulAlgoConfigAttributes_t attribute, T) {
    T value{};
    std::size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written);
    return static_cast<unsigned long long>(value);
  };
  const std::uint32_t u32 = 0;
  char text[128];
  std::snprintf(text, sizeof(text), "id%llu/t%llu/s%llu/k%llu/r%llu/w%llu/c%llu",
                get(CUBLASLT_ALGO_CONFIG_ID, std::int32_t{}), get(CUBLASLT_ALGO_CONFIG_TILE_ID, u32),
                get(CUBLASLT_ALGO_CONFIG_STAGES_ID, u32), get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, u32),
                get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, u32), get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, u32),
                get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, std::uint16_t{}));
  return text;
}

cublasLtMatrixLayout_t layout(cudaDataType_t type, cublasOperation_t op, std::uint64_t rows, std::uint64_t cols,
                              std::int64_t ld) {
  cublasLtMatrixLayout_t result = nullptr;
  const bool t = op != CUBLAS_OP_N;
  check(cublasLtMatrixLayoutCreate(&result, type, t ? cols : rows, t ? rows : cols, ld), "layout");
  return result;
}

Timing time_gemm(cublasLtHandle_t handle, const Gemm& g, void* workspace, std::size_t workspace_bytes, bool no_split_k,
                 int reps, cudaStream_t stream) {
  cublasLtMatmulDesc_t desc = nullptr;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &g.transa, sizeof(g.transa)), "transa");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &g.transb, sizeof(g.transb)), "transb");
  cublasLtMatrixLayout_t a = layout(CUDA_R_16BF, g.transa, g.m, g.k, g.lda);
  cublasLtMatrixLayout_t b = layout(CUDA_R_16BF, g.transb, g.k, g.n, g.ldb);
  cublasLtMatrixLayout_t c = layout(g.c_type, CUBLAS_OP_N, g.m, g.n, static_cast<std::int64_t>(g.m));
  cublasLtMatmulPreference_t preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&preference), "preference");
  const std::uint64_t bytes = workspace_bytes;
  check(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)),
      "workspace preference");
  if (no_split_k) {  // only algorithms that reduce over k inside the kernel
    const std::uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                               sizeof(mask)),
          "reduction scheme preference");
  }
  constexpr int kCandidates = 16;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, preference, kCandidates, results, &found),
        "heuristic");

  const std::size_t a_bytes = static_cast<std::size_t>(g.lda) * (g.transa == CUBLAS_OP_N ? g.k : g.m) * 2;
  const std::size_t b_bytes = static_cast<std::size_t>(g.ldb) * (g.transb == CUBLAS_OP_N ? g.n : g.k) * 2;
  const std::size_t c_bytes = g.m * g.n * (g.c_type == CUDA_R_32F ? 4 : 2);
  const DeviceArray da(a_bytes), db(b_bytes), dc(c_bytes);
  const float alpha = 1.0f;
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");

  Timing timing;
  timing.candidates = found;
  timing.best_ms = 1e30f;
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    auto launch = [&] {
      return cublasLtMatmul(handle, desc, &alpha, da.get(), a, db.get(), b, &g.beta, dc.get(), c, dc.get(), c,
                            &results[i].algo, workspace, workspace_bytes, stream);
    };
    bool ok = true;
    for (int w = 0; w < 3 && ok; ++w) ok = launch() == CUBLAS_STATUS_SUCCESS;
    if (!ok) continue;
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
      check(cudaEventRecord(start, stream), "record");
      check(launch(), "matmul");
      check(cudaEventRecord(stop, stream), "record");
      check(cudaEventSynchronize(stop), "sync");
      float t = 0;
      check(cudaEventElapsedTime(&t, start, stop), "elapsed");
      ms.push_back(t);
    }
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    const float median = ms[ms.size() / 2];
    if (i == 0) {
      timing.first_ms = median;
      timing.first_config = describe(results[i].algo);
    }
    if (median < timing.best_ms) {
      timing.best_ms = median;
      timing.best_index = i;
      timing.best_config = describe(results[i].algo);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatmulDescDestroy(desc);
  return timing;
}

// The GEMMs of one step in cuBLASLt's terms (see kernels/cuda/cublaslt_matmul_cuda.cpp:
// a row-major product C[M, N] = A[M, K] B[K, N] is the column-major C^T = B^T A^T).
std::vector<Gemm> step_gemms(std::uint64_t tokens, std::uint64_t hidden, std::uint64_t ffn, int layers,
                             std::uint64_t vocab, std::uint64_t chunk_rows) {
  std::vector<Gemm> gemms;
  auto linear = [&](const std::string& name, std::uint64_t in, std::uint64_t out) {
    // forward: out[T, O] = in[T, I] W[O, I]^T
    gemms.push_back({name + " forward", layers, CUBLAS_OP_T, CUBLAS_OP_N, out, tokens, in,
                     static_cast<std::int64_t>(in), static_cast<std::int64_t>(in), CUDA_R_16BF, 0.0f});
    // data gradient: d_in[T, I] = d_out[T, O] W[O, I]
    gemms.push_back({name + " data grad", layers, CUBLAS_OP_N, CUBLAS_OP_N, in, tokens, out,
                     static_cast<std::int64_t>(in), static_cast<std::int64_t>(out), CUDA_R_16BF, 0.0f});
    // weight gradient: dW[O, I] += d_out[T, O]^T in[T, I], fp32
    gemms.push_back({name + " weight grad", layers, CUBLAS_OP_N, CUBLAS_OP_T, in, out, tokens,
                     static_cast<std::int64_t>(in), static_cast<std::int64_t>(out), CUDA_R_32F, 1.0f});
  };
  linear("qkv", hidden, 3 * hidden);
  linear("proj", hidden, hidden);
  linear("fc1", hidden, ffn);
  linear("fc2", ffn, hidden);
  const int chunks = static_cast<int>((tokens + chunk_rows - 1) / chunk_rows);
  // logits[rows, V] = x[rows, C] E[V, C]^T, fp32
  gemms.push_back({"logits", chunks, CUBLAS_OP_T, CUBLAS_OP_N, vocab, chunk_rows, hidden,
                   static_cast<std::int64_t>(hidden), static_cast<std::int64_t>(hidden), CUDA_R_32F, 0.0f});
  // d_x[rows, C] = g[rows, V] E[V, C], g bf16 at row stride 2 V
  gemms.push_back({"logits data grad", chunks, CUBLAS_OP_N, CUBLAS_OP_N, hidden, chunk_rows, vocab,
                   static_cast<std::int64_t>(hidden), static_cast<std::int64_t>(2 * vocab), CUDA_R_16BF, 0.0f});
  // dE[V, C] += g[rows, V]^T x[rows, C], fp32
  gemms.push_back({"embedding grad", chunks, CUBLAS_OP_N, CUBLAS_OP_T, hidden, vocab, chunk_rows,
                   static_cast<std::int64_t>(hidden), static_cast<std::int64_t>(2 * vocab), CUDA_R_32F, 1.0f});
  return gemms;
}

}  // namespace

int main(int argc, char** argv) {
  const adamant::bench::BenchFlags flags(argc, argv, "matmul_algorithm_bench",
                                         "[--reps N] [--model 126m|1.3b] [--no-split-k] [--weight-grad-bf16]",
                                         {"--reps", "--model"}, {"--no-split-k", "--weight-grad-bf16"});
  const int reps = flags.whole_number("--reps", 15, 1);
  const bool no_split_k = flags.switch_given("--no-split-k");
  const std::string model = flags.one_of("--model", "126m", {"126m", "1.3b"});
  const bool large = model == "1.3b";
  // 126M: micro-batch 8 x 2048 tokens; 1.3B: micro-batch 4 x 2048. Logits chunks of 2^27 elements.
  const std::uint64_t tokens = large ? 8192 : 16384, hidden = large ? 2048 : 768, vocab = 50304;
  const int layers = large ? 24 : 12;
  const std::uint64_t chunk_rows = (std::uint64_t{1} << 27) / vocab;
  std::vector<Gemm> gemms = step_gemms(tokens, hidden, 4 * hidden, layers, vocab, chunk_rows);
  if (flags.switch_given("--weight-grad-bf16")) {
    for (Gemm& g : gemms) {
      if (g.beta != 0.0f) {
        g.c_type = CUDA_R_16BF;
        g.beta = 0.0f;
        g.name += " bf16";
      }
    }
  }

  cublasLtHandle_t handle = nullptr;
  check(cublasLtCreate(&handle), "cublasLtCreate");
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;  // as kernels/cuda/cublaslt_context.h
  const DeviceArray workspace(kWorkspace);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "stream");

  std::printf("GPT-3 %s, %llu tokens: cuBLASLt's first algorithm against the fastest of its candidates\n",
              model.c_str(), static_cast<unsigned long long>(tokens));
  std::printf("%-22s %6s %10s %10s %6s %7s %5s %10s\n", "gemm", "count", "first ms", "best ms", "ratio", "TFLOP/s",
              "best", "candidates");
  double first_total = 0, best_total = 0;
  for (const Gemm& g : gemms) {
    const Timing t = time_gemm(handle, g, workspace.get(), kWorkspace, no_split_k, reps, stream);
    const double tflops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) /
                          (t.best_ms * 1e-3) * 1e-12;  // the best algorithm's
    std::printf("%-22s %6d %10.4f %10.4f %6.3f %7.0f %5d %10d  %s -> %s\n", g.name.c_str(), g.per_step, t.first_ms,
                t.best_ms, t.first_ms / t.best_ms, tflops, t.best_index, t.candidates, t.first_config.c_str(),
                t.best_config.c_str());
    first_total += g.per_step * t.first_ms;
    best_total += g.per_step * t.best_ms;
  }
  std::printf("per step: first %.3f ms, best %.3f ms (%.1f%% less)\n", first_total, best_total,
              100.0 * (first_total - best_total) / first_total);
  cudaStreamDestroy(stream);
  cublasLtDestroy(handle);
  return 0;
}

// Timing cuBLASLt's candidate algorithms for the problems a workspace has run, and the
// GPU they were timed on (kernels/matmul_algorithms.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/core/stream.h"
#include "adamant/kernels/cuda/cublaslt_context.h"
#include "adamant/kernels/cuda/workspace_resources.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/matmul_algorithms.h"
#include "adamant/kernels/workspace.h"

namespace adamant::kernels {

static_assert(CUDA_R_32F == matmul_type::kF32 && CUDA_R_16F == matmul_type::kF16 && CUDA_R_16BF == matmul_type::kBF16,
              "kernels/matmul_algorithms.h names cudaDataType_t values that CUDA no longer uses");

namespace {

cuda::CublasLtContext& context_of(const Workspace& workspace, const char* what) {
  ADAMANT_CHECK(workspace.device().is_cuda(), "{}: the workspace is on {}; matmul algorithms are a GPU's", what,
                workspace.device().str());
  ADAMANT_CHECK(workspace.needs().matmul, "{}: the workspace was made without matmul needs", what);
  return workspace.resources().matmul();
}

std::size_t element_bytes(std::int32_t type) {
  switch (static_cast<cudaDataType_t>(type)) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F:
      return 2;
    default:
      fail("tune-matmul: operand type {} is not one the matmuls use (fp32, bf16, fp16)", type);
  }
}

// A buffer of `count` values of `type`, uniform in [-1, 1) from a fixed seed: the tensor
// cores draw more power on varied operands than on constant ones, and so clock as in a run.
Buffer random_buffer(std::size_t count, std::int32_t type, std::uint64_t seed, Device device) {
  const std::size_t bytes = count * element_bytes(type);
  std::vector<std::uint8_t> host(bytes);
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < count; ++i) {
    state ^= state << 13;  // xorshift64
    state ^= state >> 7;
    state ^= state << 17;
    const float value = static_cast<float>(state >> 40) * 0x1p-23f - 1.0f;
    if (type == CUDA_R_32F) {
      std::memcpy(host.data() + 4 * i, &value, 4);
    } else {
      const std::uint16_t bits = type == CUDA_R_16BF ? f32_to_bf16(value) : f32_to_f16(value);
      std::memcpy(host.data() + 2 * i, &bits, 2);
    }
  }
  Buffer buffer(std::max<std::size_t>(bytes, 1), device);
  ADAMANT_CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), bytes, cudaMemcpyHostToDevice));
  return buffer;
}

// One problem's operands in GPU memory and the runs of its candidates on them.
class ProblemBench {
 public:
  ProblemBench(cuda::CublasLtContext& context, const cuda::MatmulProblemSeen& problem, Device device)
      : context_(context),
        shape_(problem.key),
        descriptors_(problem.key),
        stream_(device),
        start_(device),
        stop_(device) {
    const MatmulShape& s = shape_;
    const std::size_t a_columns = s.transa == CUBLAS_OP_N ? s.k : s.m;
    const std::size_t b_columns = s.transb == CUBLAS_OP_N ? s.n : s.k;
    a_ = random_buffer(static_cast<std::size_t>(s.lda) * a_columns, s.a_type, 1, device);
    b_ = random_buffer(static_cast<std::size_t>(s.ldb) * b_columns, s.b_type, 2, device);
    c_bytes_ = static_cast<std::size_t>(s.ldc) * s.n * element_bytes(s.c_type);
    c_ = Buffer(c_bytes_, device);
    ADAMANT_CUDA_CHECK(cudaMemset(c_.data(), 0, c_bytes_));
    if (cuda::is_bias_epilogue(s.epilogue)) bias_ = random_buffer(s.m, s.bias_type, 3, device);
    // The GELU epilogues' pre-activation: written by GELU_AUX_BIAS, read by DGELU.
    if (cuda::is_aux_epilogue(s.epilogue))
      aux_ = random_buffer(static_cast<std::size_t>(s.ldc) * s.n, s.c_type, 4, device);
    arguments_.beta = problem.accumulates ? 1.0f : 0.0f;
    arguments_.a = a_.data();
    arguments_.b = b_.data();
    arguments_.c = c_.data();
    arguments_.bias = bias_.data();
    arguments_.aux = aux_.data();
  }

  std::vector<cublasLtMatmulAlgo_t> candidates(int count) const {
    return descriptors_.candidates(context_.handle(), context_.scratch().bytes, count);
  }

  // Median time of `repetitions` runs after 3 untimed ones, in microseconds.
  double time_us(const cublasLtMatmulAlgo_t& algorithm, int repetitions) {
    for (int i = 0; i < 3; ++i) run(algorithm);
    std::vector<float> times;
    for (int i = 0; i < repetitions; ++i) {
      start_.record(stream_);
      run(algorithm);
      stop_.record(stream_);
      stop_.synchronize();
      times.push_back(stop_.elapsed_ms_since(start_));
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return 1e3 * times[times.size() / 2];
  }

  // The output of one run from the same starting output, as float.
  std::vector<float> output(const cublasLtMatmulAlgo_t& algorithm) {
    ADAMANT_CUDA_CHECK(cudaMemsetAsync(c_.data(), 0, c_bytes_, cuda_stream()));
    run(algorithm);
    if (shape_.c_type == CUDA_R_32F) {
      std::vector<float> values(c_bytes_ / sizeof(float));
      copy_output_to(values.data());
      return values;
    }
    std::vector<std::uint16_t> bits(c_bytes_ / sizeof(std::uint16_t));
    copy_output_to(bits.data());
    std::vector<float> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) {
      values[i] = shape_.c_type == CUDA_R_16BF ? bf16_to_f32(bits[i]) : f16_to_f32(bits[i]);
    }
    return values;
  }

 private:
  void run(const cublasLtMatmulAlgo_t& algorithm) {
    const cuda::DeviceScratch scratch = context_.scratch();
    cuda::check_cublas(
        descriptors_.run(context_.handle(), algorithm, arguments_, scratch.data, scratch.bytes, cuda_stream()),
        "cublasLtMatmul (tune-matmul)");
  }

  cudaStream_t cuda_stream() const { return static_cast<cudaStream_t>(stream_.handle()); }
  void copy_output_to(void* host) {
    ADAMANT_CUDA_CHECK(cudaMemcpyAsync(host, c_.data(), c_bytes_, cudaMemcpyDeviceToHost, cuda_stream()));
    ADAMANT_CUDA_CHECK(cudaStreamSynchronize(cuda_stream()));
  }

  cuda::CublasLtContext& context_;
  MatmulShape shape_;
  cuda::MatmulDescriptors descriptors_;
  Buffer a_, b_, c_, bias_, aux_;
  std::size_t c_bytes_ = 0;
  cuda::MatmulArguments arguments_;
  Stream stream_;
  Event start_, stop_;
};

// The first answer's output, which a faster candidate has to agree with.
struct Reference {
  std::vector<float> values;
  float largest = 0;  // magnitude

  explicit Reference(std::vector<float> output) : values(std::move(output)) {
    for (const float v : values) largest = std::max(largest, std::abs(v));
  }

  // Bitwise equal to `again`, and within 1% of the largest magnitude of the first answer's
  // output (different summation orders differ far less; a broken kernel far more).
  bool agrees(const std::vector<float>& output, const std::vector<float>& again) const {
    if (std::memcmp(output.data(), again.data(), output.size() * sizeof(float)) != 0) return false;
    for (std::size_t i = 0; i < output.size(); ++i) {
      if (!(std::abs(output[i] - values[i]) <= 0.01f * largest)) return false;
    }
    return true;
  }
};

MatmulAlgorithmRecord tune_problem(cuda::CublasLtContext& context, const cuda::MatmulProblemSeen& problem,
                                   Device device, const MatmulTuningOptions& options) {
  ProblemBench bench(context, problem, device);
  const std::vector<cublasLtMatmulAlgo_t> candidates = bench.candidates(options.candidates);
  ADAMANT_CHECK(!candidates.empty(), "tune-matmul: cuBLASLt has no algorithm for a {}x{}x{} product it ran before",
                problem.key.m, problem.key.n, problem.key.k);
  std::vector<double> times;
  for (const cublasLtMatmulAlgo_t& candidate : candidates)
    times.push_back(bench.time_us(candidate, options.repetitions));

  std::vector<std::size_t> fastest_first(candidates.size());
  for (std::size_t i = 0; i < fastest_first.size(); ++i) fastest_first[i] = i;
  std::stable_sort(fastest_first.begin(), fastest_first.end(),
                   [&](std::size_t x, std::size_t y) { return times[x] < times[y]; });
  std::size_t chosen = 0;
  std::optional<Reference> reference;  // only read back when a candidate is fast enough to check
  for (const std::size_t i : fastest_first) {
    if (i == 0 || times[i] > (1.0 - options.min_gain) * times[0]) break;
    if (!reference) reference.emplace(bench.output(candidates[0]));
    if (reference->agrees(bench.output(candidates[i]), bench.output(candidates[i]))) {
      chosen = i;
      break;
    }
  }

  MatmulAlgorithmRecord record;
  record.target = context.target();
  record.shape = problem.key;
  static_assert(sizeof(candidates[chosen].data) == sizeof(record.choice.algorithm));
  std::memcpy(record.choice.algorithm.data(), candidates[chosen].data, sizeof(candidates[chosen].data));
  record.choice.config = cuda::algorithm_config(candidates[chosen]);
  record.choice.heuristic_us = times[0];
  record.choice.chosen_us = times[chosen];
  return record;
}

}  // namespace

MatmulTarget matmul_target(const Workspace& workspace) { return context_of(workspace, "matmul_target").target(); }

std::vector<MatmulAlgorithmRecord> tune_matmul_algorithms(Workspace& workspace, const MatmulTuningOptions& options) {
  ADAMANT_CHECK(options.candidates >= 1 && options.repetitions >= 1 && options.min_gain >= 0 && options.min_gain < 1,
                "tune-matmul: {} candidates, {} repetitions, minimum gain {}; use at least 1, at least 1 and a "
                "fraction in [0, 1)",
                options.candidates, options.repetitions, options.min_gain);
  cuda::CublasLtContext& context = context_of(workspace, "tune-matmul");
  const cuda::CurrentDevice current(workspace.device());
  ADAMANT_CUDA_CHECK(cudaDeviceSynchronize());  // the run's work is done before its scratch is borrowed
  std::vector<MatmulAlgorithmRecord> records;
  for (const cuda::MatmulProblemSeen& problem : context.problems()) {
    records.push_back(tune_problem(context, problem, workspace.device(), options));
  }
  return records;
}

}  // namespace adamant::kernels

// Benchmark of the classifier's softmax cross-entropy with its gradient (the kernel
// between the logits GEMM and the gradient GEMMs, kernels/cuda/classifier_kernels.cu)
// on one chunk of the fused classifier at GPT-2's vocabulary: fp32 logits in, losses
// and the bf16 gradient over each row's front half out. Each row read from global
// memory once (staged in shared memory, as the classifier runs it) against twice
// (the streamed form), against the device-to-device copy ceiling measured in the same
// run. Bytes counted: 4 read and 2 written per logit. Then the same with bf16 logits
// (model.classifier_logits_dtype: bf16), the gradient in place: 2 read and 2 written per
// logit, against a copy of those bytes. CUDA events, 3 warm-up runs, then the median of
// --reps runs, the logits restored untimed before each run.
//
//   cross_entropy_bench [--reps 20] [--rows 2668] [--vocab 50304]
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "adamant/kernels/cuda/classifier_launchers.h"
#include "adamant/kernels/cuda/device_common.cuh"
#include "bench_flags.h"
#include "cuda_bench_util.cuh"

namespace {

namespace launchers = adamant::kernels::cuda::launchers;
using adamant::bench::check;
using adamant::bench::DeviceArray;
using adamant::bench::median_ms;

// Logits about N(0, 3^2)-sized (uniform in [-5, 5)), targets spread over the vocabulary.
__global__ void fill_inputs(float* logits, std::int64_t n, std::int32_t* targets, std::int64_t rows,
                            std::int64_t vocab) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    logits[i] = 5.0f * adamant::bench::hashed_uniform(i, 7);
    if (i < rows) targets[i] = static_cast<std::int32_t>((i * 7919) % vocab);
  }
}

__global__ void round_to_bf16(const float* in, std::uint16_t* out, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    out[i] = adamant::kernels::cuda::detail::f32_to_bf16_bits(in[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const adamant::bench::BenchFlags flags(argc, argv, "cross_entropy_bench", "[--reps N] [--rows R] [--vocab V]",
                                         {"--reps", "--rows", "--vocab"});
  const int reps = flags.whole_number("--reps", 20, 1);
  // 2^27 logits: a chunk of the fused classifier at GPT-2's vocabulary
  const std::int64_t rows = flags.whole_number("--rows", 2668, 1), vocab = flags.whole_number("--vocab", 50304, 1);
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  const std::int64_t n = rows * vocab;
  const double bytes = 6.0 * static_cast<double>(n);
  std::printf("device: %s, %d SMs; %lld rows of %lld fp32 logits, median of %d\n", props.name,
              props.multiProcessorCount, static_cast<long long>(rows), static_cast<long long>(vocab), reps);

  DeviceArray pristine(n * sizeof(float)), logits(n * sizeof(float)), copy_to(static_cast<std::size_t>(bytes) / 2);
  DeviceArray targets(rows * sizeof(std::int32_t)), losses(rows * sizeof(float));
  fill_inputs<<<props.multiProcessorCount * 8, 256>>>(pristine.as<float>(), n, targets.as<std::int32_t>(), rows, vocab);
  check(cudaGetLastError(), "fill");
  const auto restore = [&] {
    check(cudaMemcpyAsync(logits.as<void>(), pristine.as<void>(), logits.bytes(), cudaMemcpyDeviceToDevice),
          "restore the logits");
  };
  const auto run = [&](launchers::RowReads reads) {
    return [&, reads] {
      check(launchers::softmax_cross_entropy(
                logits.as<float>(), adamant::DType::f32, targets.as<std::int32_t>(), losses.as<float>(), rows, vocab,
                launchers::CrossEntropyGradient::bf16_in_row, 1.0f / 16384, nullptr, reads),
            "softmax_cross_entropy");
    };
  };
  // The ceiling: a copy that reads and writes as many bytes in all (3 per logit each way).
  const double copy_ms = median_ms(reps, [&] {
    check(cudaMemcpyAsync(copy_to.as<void>(), pristine.as<void>(), copy_to.bytes(), cudaMemcpyDeviceToDevice), "copy");
  });
  const double twice_ms = median_ms(reps, run(launchers::RowReads::twice), restore);
  const double once_ms = median_ms(reps, run(launchers::RowReads::once_where_it_fits), restore);
  const auto report = [&](const char* name, double ms) {
    std::printf("%-40s %8.3f ms  %5.2f TB/s  %5.1f%% of the copy\n", name, ms, bytes / (ms * 1e-3) / 1e12,
                100.0 * copy_ms / ms);
  };
  report("device-to-device copy (same bytes)", copy_ms);
  report("rows read twice (streamed)", twice_ms);
  report("rows read once (staged in shared memory)", once_ms);
  std::printf("staged / streamed speed-up: %.2fx\n", twice_ms / once_ms);

  // bf16 logits: the same values rounded, the gradient written over them in place.
  DeviceArray pristine_bf16(n * sizeof(std::uint16_t)), logits_bf16(n * sizeof(std::uint16_t));
  DeviceArray copy_bf16_to(2 * n * sizeof(std::uint16_t));
  round_to_bf16<<<props.multiProcessorCount * 8, 256>>>(pristine.as<float>(), pristine_bf16.as<std::uint16_t>(), n);
  check(cudaGetLastError(), "round");
  const double bf16_bytes = 4.0 * static_cast<double>(n);
  const double bf16_copy_ms = median_ms(reps, [&] {
    check(cudaMemcpyAsync(copy_bf16_to.as<void>(), pristine_bf16.as<void>(), pristine_bf16.bytes(),
                          cudaMemcpyDeviceToDevice),
          "copy");
  });
  const double bf16_ms = median_ms(
      reps,
      [&] {
        check(launchers::softmax_cross_entropy(logits_bf16.as<void>(), adamant::DType::bf16, targets.as<std::int32_t>(),
                                               losses.as<float>(), rows, vocab,
                                               launchers::CrossEntropyGradient::bf16_in_row, 1.0f / 16384, nullptr),
              "softmax_cross_entropy (bf16 logits)");
      },
      [&] {
        check(cudaMemcpyAsync(logits_bf16.as<void>(), pristine_bf16.as<void>(), logits_bf16.bytes(),
                              cudaMemcpyDeviceToDevice),
              "restore the bf16 logits");
      });
  std::printf("%-40s %8.3f ms  %5.2f TB/s  %5.1f%% of the copy\n", "bf16 copy (2 + 2 bytes a logit)", bf16_copy_ms,
              bf16_bytes / (bf16_copy_ms * 1e-3) / 1e12, 100.0);
  std::printf("%-40s %8.3f ms  %5.2f TB/s  %5.1f%% of the copy\n", "bf16 logits, rows read once", bf16_ms,
              bf16_bytes / (bf16_ms * 1e-3) / 1e12, 100.0 * bf16_copy_ms / bf16_ms);
  std::printf("bf16 logits against fp32 logits (both read once): %.2fx\n", once_ms / bf16_ms);
  return 0;
}

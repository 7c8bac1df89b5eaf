// Benchmark of the CUDA flash attention kernels (causal, bf16) on the attention
// shapes of GPT-3 126M, 1.3B, 2.7B and 760M (head sizes 64, 128, 80 and 96) at sequence
// 2048, and of 126M and 1.3B at 8192. Times the launch functions
// the kernels/ API calls (kernels/cuda/flash_attention_launchers.h) with CUDA
// events: 3 warm-up runs, then the median of --reps runs. FLOPs counted as for
// causal attention: forward 2 B H L^2 d (half of the dense 4 B H L^2 d), backward
// 2.5 times that. The backward is timed a second time with the
// score scratch (kernels/flash_attention_scores.h): the query pass reading the score
// gradients the key pass stored, and with --score-slots N a third time with a scratch for
// only N (sample, head) slots, which runs the two passes a group of slots at a time.
// bench/torch_sdpa_peer.py times PyTorch on the same shapes.
//
//   flash_attention_bench [--reps 20] [--dropout 0] [--score-slots N] [--json out.json]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/flash_attention_scores.h"
#include "bench_flags.h"
#include "cuda_bench_util.cuh"

namespace {

namespace launchers = adamant::kernels::cuda::flash_attention_launchers;

using adamant::bench::check;
using adamant::bench::DeviceArray;
using adamant::bench::median_ms;

// bf16 bits of a value uniform in [-1, 1) from a hash of the index.
__global__ void fill_bf16(std::uint16_t* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    x[i] = static_cast<std::uint16_t>(__float_as_uint(adamant::bench::hashed_uniform(i, seed)) >> 16);
  }
}

struct Shape {
  const char* model;
  int batch, heads, seq, head_dim;
};

struct Result {
  Shape shape;
  double forward_ms, backward_ms, forward_tflops, backward_tflops;
  double backward_stored_ms;   // with the score scratch
  double backward_grouped_ms;  // with a scratch for --score-slots slots (else 0)
  int score_slots;
};

Result measure(const Shape& shape, float dropout_probability, int reps, int score_slots) {
  const std::int64_t tokens = static_cast<std::int64_t>(shape.batch) * shape.seq;
  const std::int64_t channels = static_cast<std::int64_t>(shape.heads) * shape.head_dim;
  const std::int64_t qkv_numel = tokens * 3 * channels, out_numel = tokens * channels;
  DeviceArray qkv(qkv_numel * 2), out(out_numel * 2), d_out(out_numel * 2), d_qkv(qkv_numel * 2);
  DeviceArray logsumexp(static_cast<std::size_t>(tokens) * shape.heads * sizeof(float));
  DeviceArray statistics(adamant::kernels::flash_attention_statistics_bytes(shape.batch, shape.heads, shape.seq));
  fill_bf16<<<1024, 256>>>(qkv.as<std::uint16_t>(), qkv_numel, 1);
  fill_bf16<<<1024, 256>>>(d_out.as<std::uint16_t>(), out_numel, 2);
  check(cudaGetLastError(), "fill");

  const launchers::Problem problem{shape.batch, shape.seq, shape.heads, shape.head_dim};
  launchers::Dropout dropout{};
  dropout.enabled = dropout_probability > 0.0f;
  dropout.probability = dropout_probability;
  dropout.keep_scale = 1.0f / (1.0f - dropout_probability);
  dropout.seed = 1234;
  dropout.stream_base = 0;
  dropout.stream_per_sample = 1;
  const launchers::ForwardOperands forward{qkv.as<std::uint16_t>(), out.as<std::uint16_t>(), logsumexp.as<float>()};
  const launchers::BackwardOperands backward{d_out.as<std::uint16_t>(), qkv.as<std::uint16_t>(),
                                             out.as<std::uint16_t>(),   logsumexp.as<float>(),
                                             d_qkv.as<std::uint16_t>(), statistics.as<float>()};

  Result r{shape, 0, 0, 0, 0, 0, 0, 0};
  r.forward_ms = median_ms(reps, [&] {
    check(launchers::flash_attention_forward(forward, problem, dropout, nullptr), "flash_attention_forward");
  });
  r.backward_ms = median_ms(reps, [&] {
    check(launchers::flash_attention_backward(backward, problem, dropout, nullptr), "flash_attention_backward");
  });
  {  // the score scratch lives for these timings only
    DeviceArray scores(adamant::kernels::flash_attention_scores_bytes(shape.batch, shape.heads, shape.seq));
    launchers::BackwardOperands stored = backward;
    stored.d_scores = scores.as<std::uint16_t>();
    stored.score_slots = shape.batch * shape.heads;
    r.backward_stored_ms = median_ms(reps, [&] {
      check(launchers::flash_attention_backward(stored, problem, dropout, nullptr), "flash_attention_backward");
    });
    if (score_slots > 0) {
      stored.score_slots = r.score_slots = std::min(score_slots, shape.batch * shape.heads);
      r.backward_grouped_ms = median_ms(reps, [&] {
        check(launchers::flash_attention_backward(stored, problem, dropout, nullptr), "flash_attention_backward");
      });
    }
  }
  const double forward_flops =
      2.0 * shape.batch * shape.heads * static_cast<double>(shape.seq) * shape.seq * shape.head_dim;
  r.forward_tflops = forward_flops / (r.forward_ms * 1e-3) / 1e12;
  r.backward_tflops = 2.5 * forward_flops / (r.backward_ms * 1e-3) / 1e12;
  std::printf(
      "%-5s B=%d H=%2d L=%d d=%3d   forward %8.3f ms %6.1f TFLOP/s   backward %8.3f ms %6.1f TFLOP/s"
      "   from stored scores %8.3f ms   with %d slot(s) %8.3f ms\n",
      shape.model, shape.batch, shape.heads, shape.seq, shape.head_dim, r.forward_ms, r.forward_tflops, r.backward_ms,
      r.backward_tflops, r.backward_stored_ms, r.score_slots, r.backward_grouped_ms);
  std::fflush(stdout);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const adamant::bench::BenchFlags flags(argc, argv, "flash_attention_bench",
                                         "[--reps N] [--dropout P] [--score-slots N] [--json PATH]",
                                         {"--reps", "--dropout", "--score-slots", "--json"});
  const int reps = flags.whole_number("--reps", 20, 1);
  // A probability below 1: the kept values are scaled by 1 / (1 - P).
  const auto dropout = static_cast<float>(flags.number("--dropout", 0.0, 0.0, 1.0));
  const int score_slots = flags.whole_number("--score-slots", 0, 0);
  const std::string json_path = flags.text("--json", "");
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  std::printf("device: %s, %d SMs; causal, bf16, dropout %g, median of %d\n", props.name, props.multiProcessorCount,
              static_cast<double>(dropout), reps);

  // GPT-3 126M, 1.3B and 2.7B at sequence 2048, and 126M and 1.3B at 8192 (same tokens per batch).
  const std::vector<Shape> shapes{{"126M", 8, 12, 2048, 64}, {"1.3B", 4, 16, 2048, 128}, {"2.7B", 4, 32, 2048, 80},
                                  {"760M", 4, 16, 2048, 96}, {"126M", 2, 12, 8192, 64},  {"1.3B", 1, 16, 8192, 128}};
  std::vector<Result> results;
  for (const Shape& shape : shapes) results.push_back(measure(shape, dropout, reps, score_slots));

  if (!json_path.empty()) {
    FILE* file = std::fopen(json_path.c_str(), "w");
    if (file == nullptr) {
      std::fprintf(stderr, "flash_attention_bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(file, "{\n  \"device\": \"%s\",\n  \"dropout\": %g,\n  \"reps\": %d,\n  \"results\": [\n", props.name,
                 static_cast<double>(dropout), reps);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(file,
                   "    {\"model\": \"%s\", \"batch\": %d, \"heads\": %d, \"seq\": %d, \"head_dim\": %d, "
                   "\"forward_ms\": %.4f, \"backward_ms\": %.4f, \"forward_tflops\": %.2f, "
                   "\"backward_tflops\": %.2f, \"backward_stored_ms\": %.4f, \"score_slots\": %d, "
                   "\"backward_grouped_ms\": %.4f}%s\n",
                   r.shape.model, r.shape.batch, r.shape.heads, r.shape.seq, r.shape.head_dim, r.forward_ms,
                   r.backward_ms, r.forward_tflops, r.backward_tflops, r.backward_stored_ms, r.score_slots,
                   r.backward_grouped_ms, i + 1 < results.size() ? "," : "");
    }
    std::fprintf(file, "  ]\n}\n");
    std::fclose(file);
  }
  return 0;
}

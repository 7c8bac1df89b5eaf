// Could the optimizer's update run beside the next step's forward GEMMs instead of before
// them, on one GPU, and how much would a step save? The update is memory-bound and the GEMMs
// compute-bound, so splitting the SMs between them could hide most of the update. This bench
// gives the update s SMs of its own, tells cuBLASLt the GEMMs have the rest
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), and times both at once against one after the other.
//
// For GPT-3 126M (micro-batch 8 x 2048 tokens) and 1.3B (4 x 2048); CUDA events, median of
// --reps after 3 warm-ups, each run behind a kernel that holds the GPU while the host
// launches (cuda_bench_util.cuh), so that the times are the GPU's alone:
//
//   gemms    the forward products of every layer in order (QKV, attention output, MLP up,
//            MLP down), then the classifier over all tokens in one product: bf16 operands
//            and output, fp32 accumulation, cuBLASLt's first heuristic answer, 32 MiB
//            workspace, all SMs;
//   update   an Adam-like update of every parameter on the whole GPU (as many 1024-thread
//            blocks as fit at once, their count printed). It reads the fp32 gradient and
//            reads and writes the fp32 master weight and both moments: 4 + 3 x 8 = 28 bytes
//            a parameter (the bf16 weight copy the model would also write is left out);
//   serial   update, then gemms, on one stream: what a step does now;
//   overlap  for each s of --sms: the update on a second stream on s blocks that each hold a
//            whole SM, the gemms on the first stream with an SM target of (SMs - s), timed
//            from one start to the join of both streams. Each side is also timed alone with
//            that split, to show its own slowdown. The saving is serial - overlap. Where the
//            update ends first, the GEMMs after it keep their target: the split is fixed.
//            The overlap is timed once more with the GEMMs untargeted (their grids sized for
//            every SM), to show whether the target is what makes the overlap pay.
//   bulk     the model's Adam kernel in its form for a few SMs (kernels/cuda/adam_bulk.cu:
//            store_param_remainders, its operands moved by bulk copies, the same 28 bytes a
//            parameter, the bf16 weights and remainders in the master's bytes), on every SM
//            and on s SMs, alone and beside the targeted GEMMs: whether a few SMs draw more
//            of the memory's bandwidth that way.
//
//   sm_partition_overlap_bench [--reps 15] [--model 126m|1.3b|both] [--sms 8,16,24,32]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "adam_constants.h"
#include "adamant/kernels/cuda/launchers.h"
#include "bench_flags.h"
#include "cuda_bench_util.cuh"

namespace {

using adamant::bench::check;
using adamant::bench::DeviceArray;

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "sm_partition_overlap_bench: %s failed: %s\n", what, cublasLtGetStatusName(status));
    std::exit(1);
  }
}

// Owns a CUDA or cuBLASLt object, which a create call writes through out(), and hands it to
// `Destroy` at the end of its scope.
template <typename Object, auto Destroy>
class Owned {
 public:
  Owned() = default;
  ~Owned() {
    if (object_ != nullptr) Destroy(object_);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Object get() const { return object_; }
  Object* out() { return &object_; }

 private:
  Object object_ = nullptr;
};

using LtHandle = Owned<cublasLtHandle_t, cublasLtDestroy>;
using MatmulDescription = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using MatrixLayout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using MatmulPreference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;
using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;

// Times work on two streams, from one start to the join of both. The main stream first runs
// a kernel that holds the GPU for longer than the host takes to launch a run (about a hundred
// cuBLASLt calls of a few microseconds each), then records the start, which the side stream
// waits for: both streams start together and the host's launch time is not measured. The
// side stream has the higher priority, so that where both have work ready the block scheduler
// places the side's blocks first: the update's s blocks take their SMs at the start instead
// of waiting for a GEMM that was given every SM to drain.
class TwoStreamClock {
 public:
  TwoStreamClock() {
    int least = 0, greatest = 0;
    check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
    check(cudaStreamCreateWithPriority(main_.out(), cudaStreamNonBlocking, least), "cudaStreamCreateWithPriority");
    check(cudaStreamCreateWithPriority(side_.out(), cudaStreamNonBlocking, greatest), "cudaStreamCreateWithPriority");
    check(cudaEventCreate(start_.out()), "cudaEventCreate");
    check(cudaEventCreate(stop_.out()), "cudaEventCreate");
    check(cudaEventCreateWithFlags(side_done_.out(), cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }

  cudaStream_t main() const { return main_.get(); }
  cudaStream_t side() const { return side_.get(); }

  // The median of `reps` runs after three warm-ups; `run` enqueues on main() and side().
  double median_ms(int reps, const std::function<void()>& run) {
    for (int i = 0; i < 3; ++i) time_ms(run);
    std::vector<float> times;
    for (int i = 0; i < reps; ++i) times.push_back(time_ms(run));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

 private:
  static constexpr std::uint64_t kHoldNanoseconds = 2'000'000;

  float time_ms(const std::function<void()>& run) {
    adamant::bench::hold_gpu_kernel<<<1, 1, 0, main()>>>(kHoldNanoseconds);
    check(cudaGetLastError(), "hold_gpu_kernel");
    check(cudaEventRecord(start_.get(), main()), "cudaEventRecord");
    check(cudaStreamWaitEvent(side(), start_.get()), "cudaStreamWaitEvent");
    run();
    check(cudaEventRecord(side_done_.get(), side()), "cudaEventRecord");
    check(cudaStreamWaitEvent(main(), side_done_.get()), "cudaStreamWaitEvent");
    check(cudaEventRecord(stop_.get(), main()), "cudaEventRecord");
    check(cudaEventSynchronize(stop_.get()), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start_.get(), stop_.get()), "cudaEventElapsedTime");
    return ms;
  }

  Stream main_, side_;
  Event start_, side_done_, stop_;
};

constexpr int kUpdateThreads = 1024;
constexpr double kUpdateBytesPerParameter = 28;  // read grad; read and write master, exp_avg, exp_avg_sq

struct AdamArrays {
  const float* grad;
  float* master;
  float* exp_avg;
  float* exp_avg_sq;
  std::int64_t count;
};

__device__ __forceinline__ void adam_step(float grad, float& master, float& exp_avg, float& exp_avg_sq) {
  constexpr float kLearningRate = 1e-4f, kBeta1 = 0.9f, kBeta2 = 0.95f, kEpsilon = 1e-8f;
  exp_avg = kBeta1 * exp_avg + (1.0f - kBeta1) * grad;
  exp_avg_sq = kBeta2 * exp_avg_sq + (1.0f - kBeta2) * grad * grad;
  master -= kLearningRate * exp_avg / (sqrtf(exp_avg_sq) + kEpsilon);
}

// Grid-stride over float4 vectors, two a thread a turn with all loads issued before the math:
// in the overlap one 1024-thread block is all an SM holds, so each thread keeps several loads
// in flight for its SM to draw what bandwidth it can. One block an SM at most (launch bounds),
// so that the overlap's s blocks land on s SMs.
__global__ void __launch_bounds__(kUpdateThreads, 1) adam_update(AdamArrays a) {
  constexpr int kVectorsPerTurn = 2;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t vectors = a.count / 4;
  const auto* grad = reinterpret_cast<const float4*>(a.grad);
  auto* master = reinterpret_cast<float4*>(a.master);
  auto* exp_avg = reinterpret_cast<float4*>(a.exp_avg);
  auto* exp_avg_sq = reinterpret_cast<float4*>(a.exp_avg_sq);
  for (std::int64_t turn = first; turn < vectors; turn += kVectorsPerTurn * threads) {
    float4 g[kVectorsPerTurn] = {}, p[kVectorsPerTurn] = {}, m[kVectorsPerTurn] = {}, v[kVectorsPerTurn] = {};
#pragma unroll
    for (int j = 0; j < kVectorsPerTurn; ++j) {
      const std::int64_t i = turn + j * threads;
      if (i >= vectors) continue;
      g[j] = grad[i];
      p[j] = master[i];
      m[j] = exp_avg[i];
      v[j] = exp_avg_sq[i];
    }
#pragma unroll
    for (int j = 0; j < kVectorsPerTurn; ++j) {
      const std::int64_t i = turn + j * threads;
      if (i >= vectors) continue;
      adam_step(g[j].x, p[j].x, m[j].x, v[j].x);
      adam_step(g[j].y, p[j].y, m[j].y, v[j].y);
      adam_step(g[j].z, p[j].z, m[j].z, v[j].z);
      adam_step(g[j].w, p[j].w, m[j].w, v[j].w);
      master[i] = p[j];
      exp_avg[i] = m[j];
      exp_avg_sq[i] = v[j];
    }
  }
  for (std::int64_t i = 4 * vectors + first; i < a.count; i += threads) {
    adam_step(a.grad[i], a.master[i], a.exp_avg[i], a.exp_avg_sq[i]);
  }
}

// out[i] = low + width * u, u uniform in [0, 1): float or __nv_bfloat16.
template <typename T>
__global__ void fill(T* out, std::int64_t n, float low, float width, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    out[i] = static_cast<T>(low + width * adamant::bench::hashed_unit(i, seed));
  }
}

constexpr int kFillBlocks = 1024;

class OptimizerState {
 public:
  explicit OptimizerState(std::int64_t count)
      : count_(count),
        grad_(bytes(count)),
        master_(bytes(count) + 16),
        exp_avg_(bytes(count)),
        exp_avg_sq_(bytes(count)),
        segment_(3 * sizeof(std::int64_t)) {
    const std::int64_t whole[3] = {0, count, 1};  // one decaying segment over every parameter
    check(cudaMemcpy(segment_.as<void>(), whole, sizeof(whole), cudaMemcpyHostToDevice), "cudaMemcpy");
    fill<<<kFillBlocks, 256>>>(grad_.as<float>(), count, -1e-3f, 2e-3f, 1);
    fill<<<kFillBlocks, 256>>>(master_.as<float>(), count, -0.05f, 0.1f, 2);
    fill<<<kFillBlocks, 256>>>(exp_avg_.as<float>(), count, -1e-3f, 2e-3f, 3);
    fill<<<kFillBlocks, 256>>>(exp_avg_sq_.as<float>(), count, 0.0f, 1e-6f, 4);
    check(cudaGetLastError(), "fill");
  }

  // `reserved_shared_bytes` of dynamic shared memory a block, which the kernel never touches:
  // see main().
  void launch_update(int blocks, std::size_t reserved_shared_bytes, cudaStream_t stream) const {
    const AdamArrays arrays{grad_.as<float>(), master_.as<float>(), exp_avg_.as<float>(), exp_avg_sq_.as<float>(),
                            count_};
    adam_update<<<blocks, kUpdateThreads, reserved_shared_bytes, stream>>>(arrays);
    check(cudaGetLastError(), "adam_update");
  }
  // The model's Adam with bf16 weights and remainders (in the master's bytes: 4 a parameter as
  // its fp32) on `blocks` SMs, its operands moved by bulk copies (kernels/cuda/adam_bulk.cu).
  void launch_bulk_update(int blocks, cudaStream_t stream) const {
    namespace launchers = adamant::kernels::cuda::launchers;
    launchers::AdamOperands ops{};
    ops.segments = segment_.as<std::int64_t>();
    ops.num_segments = 1;
    ops.numel = count_;
    ops.grad = grad_.as<void>();
    ops.model_param = master_.as<void>();
    ops.remainder = reinterpret_cast<std::uint16_t*>(master_.as<char>() + remainder_offset());
    ops.exp_avg = exp_avg_.as<float>();
    ops.exp_avg_sq = exp_avg_sq_.as<float>();
    const launchers::AdamConstants c = adamant::bench::adam_constants_for_timing();
    check(launchers::adam_bulk(ops, adamant::DType::f32, c, blocks, stream), "adam_bulk");
  }

 private:
  static std::size_t bytes(std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(float); }
  // The remainders after the bf16 weights, 16-byte aligned for the bulk copies (the master has
  // 16 bytes to spare for it).
  std::size_t remainder_offset() const { return (static_cast<std::size_t>(count_) * 2 + 15) / 16 * 16; }

  std::int64_t count_;
  DeviceArray grad_, master_, exp_avg_, exp_avg_sq_, segment_;
};

struct ModelShape {
  const char* name;
  std::int64_t hidden, layers, tokens;
};

constexpr std::int64_t kVocab = 50304, kSequence = 2048;

// Word and position embeddings, per layer two layernorms, QKV, attention output and the two
// MLP weights with their biases, and the final layernorm (the layout of adam_bench.cu).
std::int64_t parameter_count(const ModelShape& s) {
  const std::int64_t h = s.hidden;
  return kVocab * h + kSequence * h + s.layers * (12 * h * h + 13 * h) + 2 * h;
}

// What the products read and write: every layer's own weights, packed layer after layer as
// [QKV 3h x h, attention output h x h, MLP up 4h x h, MLP down h x 4h] (so that each product
// reads its weights from memory, as the model's do), and activations shared between layers.
struct ForwardOperands {
  explicit ForwardOperands(const ModelShape& s)
      : layer_weights(bf16_bytes(s.layers * 12 * s.hidden * s.hidden)),
        embedding(bf16_bytes(kVocab * s.hidden)),
        x(bf16_bytes(s.tokens * s.hidden)),
        qkv(bf16_bytes(s.tokens * 3 * s.hidden)),
        projected(bf16_bytes(s.tokens * s.hidden)),
        up(bf16_bytes(s.tokens * 4 * s.hidden)),
        down(bf16_bytes(s.tokens * s.hidden)),
        logits(bf16_bytes(s.tokens * kVocab)) {
    std::uint64_t seed = 10;
    for (const DeviceArray* a : {&layer_weights, &embedding, &x, &up}) {
      const auto n = static_cast<std::int64_t>(a->bytes() / sizeof(__nv_bfloat16));
      const float scale = a == &x || a == &up ? 1.0f : 0.02f;
      fill<<<kFillBlocks, 256>>>(a->as<__nv_bfloat16>(), n, -scale, 2 * scale, seed++);
    }
    check(cudaGetLastError(), "fill");
  }

  static std::size_t bf16_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(__nv_bfloat16); }

  DeviceArray layer_weights, embedding;
  DeviceArray x, qkv, projected, up, down, logits;
};

// An algorithm's kernel id, tile, stages and split-K count (cuBLASLt's enum values).
std::string describe(const cublasLtMatmulAlgo_t& algorithm) {
  const auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attribute) {
    std::uint32_t value = 0;  // these four attributes are all 32-bit
    std::size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algorithm, attribute, &value, sizeof(value), &written);
    return static_cast<unsigned>(value);
  };
  char text[64];
  std::snprintf(text, sizeof(text), "id%u/t%u/s%u/k%u", get(CUBLASLT_ALGO_CONFIG_ID), get(CUBLASLT_ALGO_CONFIG_TILE_ID),
                get(CUBLASLT_ALGO_CONFIG_STAGES_ID), get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
  return text;
}

// One linear layer's forward product as PyTorch's Linear lays it out: row-major activations,
// weights stored [out, in], out[T, O] = in[T, I] W[O, I]^T. In cuBLASLt's column-major terms
// that is D[O, T] = op_T(W) in, where W is the column-major [I, O] it is in memory and
// transposed ("TN"), and in and out are the column-major [I, T] and [O, T] they are in memory.
// The algorithm is the heuristic's first answer, asked with the SM target on the description
// (0: all SMs) so that it is one chosen for that many SMs.
class LinearProduct {
 public:
  LinearProduct(cublasLtHandle_t handle, std::int64_t tokens, std::int64_t in, std::int64_t out, int sm_target,
                std::size_t workspace_bytes)
      : handle_(handle) {
    check(cublasLtMatmulDescCreate(description_.out(), CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    const std::int32_t target = sm_target;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none));
    set(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target, sizeof(target));
    bf16_matrix(weight_, in, out);
    bf16_matrix(input_, in, tokens);
    bf16_matrix(output_, out, tokens);
    MatmulPreference preference;
    check(cublasLtMatmulPreferenceCreate(preference.out()), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t bytes = workspace_bytes;
    check(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                               sizeof(bytes)),
          "MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(handle, description_.get(), weight_.get(), input_.get(), output_.get(),
                                         output_.get(), preference.get(), 1, &result, &found),
          "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) check(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic (no algorithm)");
    algorithm_ = result.algo;
  }

  void run(const void* weight, const void* input, void* output, const DeviceArray& workspace,
           cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasLtMatmul(handle_, description_.get(), &alpha, weight, weight_.get(), input, input_.get(), &beta, output,
                         output_.get(), output, output_.get(), &algorithm_, workspace.as<void>(), workspace.bytes(),
                         stream),
          "cublasLtMatmul");
  }

  std::string algorithm() const { return describe(algorithm_); }

 private:
  void set(cublasLtMatmulDescAttributes_t attribute, const void* value, std::size_t bytes) {
    check(cublasLtMatmulDescSetAttribute(description_.get(), attribute, value, bytes),
          "cublasLtMatmulDescSetAttribute");
  }

  // A packed column-major bf16 matrix.
  static void bf16_matrix(MatrixLayout& layout, std::int64_t rows, std::int64_t columns) {
    check(cublasLtMatrixLayoutCreate(layout.out(), CUDA_R_16BF, static_cast<std::uint64_t>(rows),
                                     static_cast<std::uint64_t>(columns), rows),
          "cublasLtMatrixLayoutCreate");
  }

  cublasLtHandle_t handle_;
  MatmulDescription description_;
  MatrixLayout weight_, input_, output_;
  cublasLtMatmulAlgo_t algorithm_ = {};
};

// The forward's products for one SM target, in the model's order.
class ForwardGemms {
 public:
  ForwardGemms(cublasLtHandle_t handle, const ModelShape& s, int sm_target, std::size_t workspace_bytes)
      : shape_(s),
        qkv_(handle, s.tokens, s.hidden, 3 * s.hidden, sm_target, workspace_bytes),
        projection_(handle, s.tokens, s.hidden, s.hidden, sm_target, workspace_bytes),
        up_(handle, s.tokens, s.hidden, 4 * s.hidden, sm_target, workspace_bytes),
        down_(handle, s.tokens, 4 * s.hidden, s.hidden, sm_target, workspace_bytes),
        classifier_(handle, s.tokens, s.hidden, kVocab, sm_target, workspace_bytes) {}

  // The attention output projection reads x in place of the attention's output: only the
  // products are timed.
  void run(const ForwardOperands& o, const DeviceArray& workspace, cudaStream_t stream) const {
    const std::int64_t h2 = shape_.hidden * shape_.hidden;
    for (std::int64_t layer = 0; layer < shape_.layers; ++layer) {
      const __nv_bfloat16* weights = o.layer_weights.as<__nv_bfloat16>() + layer * 12 * h2;
      qkv_.run(weights, o.x.as<void>(), o.qkv.as<void>(), workspace, stream);
      projection_.run(weights + 3 * h2, o.x.as<void>(), o.projected.as<void>(), workspace, stream);
      up_.run(weights + 4 * h2, o.x.as<void>(), o.up.as<void>(), workspace, stream);
      down_.run(weights + 8 * h2, o.up.as<void>(), o.down.as<void>(), workspace, stream);
    }
    classifier_.run(o.embedding.as<void>(), o.x.as<void>(), o.logits.as<void>(), workspace, stream);
  }

  std::string algorithms() const {
    return "qkv " + qkv_.algorithm() + ", proj " + projection_.algorithm() + ", up " + up_.algorithm() + ", down " +
           down_.algorithm() + ", classifier " + classifier_.algorithm();
  }

 private:
  ModelShape shape_;
  LinearProduct qkv_, projection_, up_, down_, classifier_;
};

struct Device {
  int sms = 0;
  int full_update_blocks = 0;             // the update's blocks that fill the GPU once
  std::size_t reserved_shared_bytes = 0;  // a block's dynamic shared memory in the overlap
};

void bench_model(const ModelShape& shape, const std::vector<int>& splits, int reps, cublasLtHandle_t handle,
                 const Device& device, const DeviceArray& workspace, TwoStreamClock& clock) {
  const std::int64_t parameters = parameter_count(shape);
  const OptimizerState state(parameters);
  const ForwardOperands operands(shape);
  check(cudaDeviceSynchronize(), "fills");
  const ForwardGemms whole(handle, shape, 0, workspace.bytes());

  const double gemms_ms = clock.median_ms(reps, [&] { whole.run(operands, workspace, clock.main()); });
  const double update_ms =
      clock.median_ms(reps, [&] { state.launch_update(device.full_update_blocks, 0, clock.main()); });
  const double serial_ms = clock.median_ms(reps, [&] {
    state.launch_update(device.full_update_blocks, 0, clock.main());
    whole.run(operands, workspace, clock.main());
  });

  std::printf("\n%s: %lld parameters (%.2f GB of update traffic), %lld layers, %lld tokens\n", shape.name,
              static_cast<long long>(parameters), kUpdateBytesPerParameter * parameters / 1e9,
              static_cast<long long>(shape.layers), static_cast<long long>(shape.tokens));
  std::printf("  %-30s %10s\n", "", "ms");
  // A row's name and time; the caller prints the rest of the line.
  const auto row = [](const std::string& what, double ms) { std::printf("  %-30s %10.3f  ", what.c_str(), ms); };
  const auto terabytes_per_second = [&](double ms) { return kUpdateBytesPerParameter * parameters / (ms * 1e9); };
  row("gemms (" + std::to_string(device.sms) + " SMs)", gemms_ms);
  std::printf("%s\n", whole.algorithms().c_str());
  row("update (" + std::to_string(device.full_update_blocks) + " blocks)", update_ms);
  std::printf("%.2f TB/s\n", terabytes_per_second(update_ms));
  row("serial", serial_ms);
  std::printf("\n");
  const double bulk_ms = clock.median_ms(reps, [&] { state.launch_bulk_update(device.sms, clock.main()); });
  row("update by bulk copies (" + std::to_string(device.sms) + " blocks)", bulk_ms);
  std::printf("%.2f TB/s\n", terabytes_per_second(bulk_ms));
  for (const int s : splits) {
    const int target = device.sms - s;
    const ForwardGemms targeted(handle, shape, target, workspace.bytes());
    const double overlap_ms = clock.median_ms(reps, [&] {
      state.launch_update(s, device.reserved_shared_bytes, clock.side());
      targeted.run(operands, workspace, clock.main());
    });
    const double targeted_ms = clock.median_ms(reps, [&] { targeted.run(operands, workspace, clock.main()); });
    const double update_alone_ms =
        clock.median_ms(reps, [&] { state.launch_update(s, device.reserved_shared_bytes, clock.side()); });
    // The same without the target: the GEMMs' grids sized for every SM while s of them are taken.
    const double untargeted_ms = clock.median_ms(reps, [&] {
      state.launch_update(s, device.reserved_shared_bytes, clock.side());
      whole.run(operands, workspace, clock.main());
    });
    row("overlap, update on " + std::to_string(s) + " SMs", overlap_ms);
    std::printf("saves %.3f ms (%.1f%% of serial)\n", serial_ms - overlap_ms,
                100.0 * (serial_ms - overlap_ms) / serial_ms);
    row("  the same, gemms untargeted", untargeted_ms);
    std::printf("saves %.3f ms (%.1f%% of serial)\n", serial_ms - untargeted_ms,
                100.0 * (serial_ms - untargeted_ms) / serial_ms);
    row("  gemms, target " + std::to_string(target) + " SMs", targeted_ms);
    std::printf("%.3fx gemms alone; %s\n", targeted_ms / gemms_ms, targeted.algorithms().c_str());
    row("  update, " + std::to_string(s) + " blocks", update_alone_ms);
    std::printf("%.2f TB/s\n", terabytes_per_second(update_alone_ms));
    const double bulk_overlap_ms = clock.median_ms(reps, [&] {
      state.launch_bulk_update(s, clock.side());
      targeted.run(operands, workspace, clock.main());
    });
    const double bulk_alone_ms = clock.median_ms(reps, [&] { state.launch_bulk_update(s, clock.side()); });
    row("overlap, bulk update on " + std::to_string(s), bulk_overlap_ms);
    std::printf("saves %.3f ms (%.1f%% of serial)\n", serial_ms - bulk_overlap_ms,
                100.0 * (serial_ms - bulk_overlap_ms) / serial_ms);
    row("  bulk update, " + std::to_string(s) + " blocks", bulk_alone_ms);
    std::printf("%.2f TB/s\n", terabytes_per_second(bulk_alone_ms));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const adamant::bench::BenchFlags flags(argc, argv, "sm_partition_overlap_bench",
                                         "[--reps N] [--model 126m|1.3b|both] [--sms 8,16,24,32]",
                                         {"--reps", "--model", "--sms"});
  const int reps = flags.whole_number("--reps", 15, 1);
  const std::string model = flags.one_of("--model", "both", {"126m", "1.3b", "both"});
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  const std::vector<int> splits = flags.whole_numbers("--sms", "8,16,24,32", 1, props.multiProcessorCount - 1);

  Device device;
  device.sms = props.multiProcessorCount;
  int blocks_per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, adam_update, kUpdateThreads, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  device.full_update_blocks = blocks_per_sm * device.sms;
  // In the overlap each update block asks for all the shared memory a block may have, which
  // it never uses: with it no second block fits on its SM, neither the update's nor a GEMM's
  // (cuBLASLt's kernels all stage their tiles in shared memory), so the update holds exactly
  // s SMs and the GEMMs the others.
  device.reserved_shared_bytes = props.sharedMemPerBlockOptin;
  check(cudaFuncSetAttribute(adam_update, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(device.reserved_shared_bytes)),
        "cudaFuncSetAttribute");

  std::printf(
      "device: %s, %d SMs; cuBLASLt %zu; update %d threads a block, %d blocks an SM alone, "
      "%zu KiB shared memory reserved a block in the overlap; median of %d\n",
      props.name, device.sms, cublasLtGetVersion(), kUpdateThreads, blocks_per_sm, device.reserved_shared_bytes / 1024,
      reps);
  LtHandle handle;
  check(cublasLtCreate(handle.out()), "cublasLtCreate");
  const DeviceArray workspace(std::size_t{32} << 20);  // as kernels/cuda/cublaslt_context.h
  TwoStreamClock clock;
  const ModelShape shapes[] = {{"GPT-3 126M, micro-batch 8 x 2048", 768, 12, 8 * kSequence},
                               {"GPT-3 1.3B, micro-batch 4 x 2048", 2048, 24, 4 * kSequence}};
  for (const ModelShape& shape : shapes) {
    const bool small = shape.hidden == 768;
    if (model == "both" || (model == "126m") == small) {
      bench_model(shape, splits, reps, handle.get(), device, workspace, clock);
    }
  }
  return 0;
}

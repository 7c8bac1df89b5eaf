#pragma once
// Dropout whose mask is a pure function of (seed, global sample index, site,
// element): the same sample gets the same mask however the batch is split into
// micro-batches or ranks, and backward regenerates the mask instead of storing it.
#include <cstdint>

#include "adamant/core/error.h"
#include "adamant/core/rng.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels {

struct DropoutArgs {
  float probability = 0.0f;  // of zeroing an element; 0 = identity
  std::uint64_t seed = 0;
  std::uint64_t first_sample_index = 0;  // global index of the batch's first sample
  std::uint32_t site = 0;                // which dropout of the model (embeddings, layer l attention, ...)
  // dropout() only: where `in` starts in the batch flattened as [batch, sample_numel], so
  // that a shard of rows (sequence parallelism) gets exactly its slice of the batch's
  // mask. A multiple of 4. The attention kernels ignore it (they always see whole samples).
  std::uint64_t first_element = 0;
  // When set, memory on the kernel's device whose value is added to first_sample_index as the
  // kernel runs: a recorded step (core/step_graph.h) replays the same launches for every
  // micro-batch and finds each one's index there.
  const std::uint64_t* sample_offset = nullptr;
};

// One Philox draw decides this many consecutive elements of a sample.
constexpr std::int64_t kDropoutGroup = 4;

constexpr int kDropoutSiteBits = 24;
constexpr std::uint64_t kMaxDropoutSample = std::uint64_t{1} << (63 - kDropoutSiteBits);

// Philox stream of one (sample, site); the top bit stays clear (weight init uses it).
constexpr std::uint64_t dropout_stream(std::uint64_t global_sample, std::uint32_t site) {
  return (global_sample << kDropoutSiteBits) | site;
}

// Four keep/drop decisions for elements [4 * group, 4 * group + 4) of one sample (the
// hidden dropout), or draw number `group` of the attention dropout with its rounds
// (kernels/attention_dropout_layout.h).
template <int kRounds = 10>
PhiloxCounter dropout_bits(const DropoutArgs& args, std::uint64_t sample_in_batch, std::uint64_t group) {
  return philox_draw<kRounds>(args.seed, group, dropout_stream(args.first_sample_index + sample_in_batch, args.site));
}
constexpr bool dropout_keeps(std::uint32_t bits, float probability) { return uniform_float(bits) >= probability; }

// Checks that samples [first_sample_index, first_sample_index + batch) have Philox streams of
// their own: `what` names the caller in the error.
inline void check_dropout_samples(std::uint64_t first_sample_index, std::int64_t batch, const char* what) {
  ADAMANT_CHECK(batch >= 0 && first_sample_index <= kMaxDropoutSample &&
                    static_cast<std::uint64_t>(batch) <= kMaxDropoutSample - first_sample_index,
                "{}: sample index {} is beyond the dropout generator's range of 2^{} samples", what, first_sample_index,
                63 - kDropoutSiteBits);
}

// args with *sample_offset folded into first_sample_index: what the CPU kernels draw from
// (on the CPU the offset is in host memory).
inline DropoutArgs with_sample_offset(const DropoutArgs& args) {
  DropoutArgs out = args;
  if (args.sample_offset != nullptr) out.first_sample_index += *args.sample_offset;
  out.sample_offset = nullptr;
  return out;
}

namespace cpu {
void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& args);
}  // namespace cpu

// Launcher in kernels/cuda/pointwise_model.cu (bf16 bit patterns); returns its cudaError_t.
// Vectorized, it needs 8-byte aligned operands and whole groups of 4 per sample.
namespace cuda {
int dropout(const std::uint16_t* in, std::uint16_t* out, std::int64_t numel, std::int64_t sample_numel,
            const DropoutParams& params, const CudaLaunch& launch, const ColumnSumsOut& column_sums);
}  // namespace cuda

namespace detail {

inline DropoutParams dropout_params(const DropoutArgs& args) {
  DropoutParams params;
  params.probability = args.probability;
  params.keep_scale = 1.0f / (1.0f - args.probability);  // the CPU kernel's T(1) / (T(1) - p) in fp32
  params.seed = args.seed;
  params.first_sample_index = args.first_sample_index;
  params.sample_offset = args.sample_offset;
  params.site = args.site;
  params.first_element = args.first_element;
  return params;
}

// `batch`: how many samples from first_sample_index on the call touches (the caller that
// sets sample_offset checks the value it writes there).
inline void check_dropout(const KernelCall& call, const DropoutArgs& args, std::int64_t batch) {
  const char* op = call.op();
  ADAMANT_CHECK(args.probability >= 0.0f && args.probability < 1.0f, "{}: dropout probability {} is outside [0, 1)", op,
                args.probability);
  ADAMANT_CHECK(args.site < (1u << kDropoutSiteBits), "{}: dropout site {} exceeds {} bits", op, args.site,
                kDropoutSiteBits);
  check_dropout_samples(args.first_sample_index, batch, op);
}

// The checks of a dropout over elements [first_element, first_element + numel) of a batch
// of samples of sample_numel elements each (dropout()'s numbering).
inline void check_dropout_range(const KernelCall& call, const DropoutArgs& args, std::int64_t numel,
                                std::int64_t sample_numel) {
  const char* op = call.op();
  ADAMANT_CHECK(numel >= 0, "{}: negative size {}", op, numel);
  call.positive("sample_numel", sample_numel);
  ADAMANT_CHECK(args.first_element % kDropoutGroup == 0,
                "{}: first_element {} is not a multiple of {}: one Philox draw decides {} consecutive elements, "
                "so a shard must start at a multiple of {} elements of the flattened batch",
                op, args.first_element, kDropoutGroup, kDropoutGroup, kDropoutGroup);
  ADAMANT_CHECK(args.first_element <= static_cast<std::uint64_t>(INT64_MAX - numel),
                "{}: first_element {} + {} elements overflows", op, args.first_element, numel);
  // The samples that [first_element, first_element + numel) touches, counted from first_sample_index.
  const auto end = static_cast<std::int64_t>(args.first_element) + numel;
  check_dropout(call, args, (end + sample_numel - 1) / sample_numel);
}

}  // namespace detail

// out[i] = keep ? in[i] / (1 - p) : 0 for i in [0, numel), where element i is element
// (first_element + i) % sample_numel of sample first_sample_index + (first_element + i) /
// sample_numel. numel need not be a multiple of sample_numel. out may alias in. Linear
// with a fixed mask, so the same call is its own backward. With a non-empty bias.d_bias,
// also the bias gradient of the layer whose output gradient `out` is (a residual
// branch's, in backward): the column sums of out, as stored, over rows of bias.columns.
inline void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel,
                    const DropoutArgs& args, const Stream& stream, const BiasGradOut& bias = {}) {
  const KernelCall call = KernelCall::model("dropout", in, stream);
  detail::check_dropout_range(call, args, numel, sample_numel);
  call.exact("in", in, numel, Role::activation);
  call.exact("out", out, numel, Role::activation);
  const bool summing = check_bias_grad_out(call, bias, numel);
  call.run(
      [&] {
        cpu::dropout(in, out, numel, sample_numel, args);
        if (summing) cpu::bias_grad(out, bias.d_bias, numel / bias.columns, bias.columns);
      },
      ADAMANT_CUDA_CALL(
          cuda::dropout(bits16_of(in), bits16_of(out), numel, sample_numel, detail::dropout_params(args),
                        launch.vectorized_if(sample_numel % kDropoutGroup == 0 && aligned_to(8, {&in, &out})),
                        cuda::column_sums_out(bias))));
}

}  // namespace adamant::kernels

#pragma once
// Dropout whose mask is a pure function of (seed, global sample index, site,
// element): the same sample gets the same mask however the batch is split into
// micro-batches or ranks, and backward regenerates the mask instead of storing it.
#include <cstdint>

#include "adamant/core/error.h"
#include "adamant/core/rng.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

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
};

// One Philox draw decides this many consecutive elements of a sample.
constexpr std::int64_t kDropoutGroup = 4;

constexpr int kDropoutSiteBits = 24;
constexpr std::uint64_t kMaxDropoutSample = std::uint64_t{1} << (63 - kDropoutSiteBits);

// Philox stream of one (sample, site); the top bit stays clear (weight init uses it).
constexpr std::uint64_t dropout_stream(std::uint64_t global_sample, std::uint32_t site) {
  return (global_sample << kDropoutSiteBits) | site;
}

// Four keep/drop decisions for elements [4 * group, 4 * group + 4) of one sample.
inline PhiloxCounter dropout_bits(const DropoutArgs& args, std::uint64_t sample_in_batch, std::uint64_t group) {
  return philox_draw(args.seed, group, dropout_stream(args.first_sample_index + sample_in_batch, args.site));
}
constexpr bool dropout_keeps(std::uint32_t bits, float probability) { return uniform_float(bits) >= probability; }

// out[i] = keep ? in[i] / (1 - p) : 0 for i in [0, numel), where element i is element
// (first_element + i) % sample_numel of sample first_sample_index + (first_element + i) /
// sample_numel. numel need not be a multiple of sample_numel. out may alias in. Linear
// with a fixed mask, so the same call is its own backward.
void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& args,
             const Stream& stream);

}  // namespace adamant::kernels

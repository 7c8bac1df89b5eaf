#pragma once
// Several sample sources mixed by weight, as Megatron's BlendableDataset does it:
// sample i comes from the source whose share so far lags its weight the most
// (greedy error minimisation), taking that source's next unused sample. The
// order is a pure function of the weights, so it is deterministic and resumable.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "adamant/data/sample_source.h"

namespace adamant::data {

// Weights normalised to sum to 1; a negative, non-finite or all-zero list throws naming model.data.data_prefix.
std::vector<double> normalize_blend_weights(std::span<const double> weights);

// Samples to build per source for `total` blended samples: ceil(total * weight * 1.005),
// Megatron's margin so the greedy blend never runs a source dry.
std::vector<std::int64_t> blended_source_sample_counts(std::span<const double> normalized_weights, std::int64_t total);

class BlendedDataset final : public SampleSource {
 public:
  // `size` blended samples; every source must hold enough samples for its share (checked here).
  BlendedDataset(std::vector<std::shared_ptr<const SampleSource>> sources, std::span<const double> weights,
                 std::int64_t size);

  std::int64_t size() const override { return static_cast<std::int64_t>(source_of_sample_.size()); }
  int seq_length() const override { return seq_length_; }
  void read_sample(std::int64_t index, std::span<std::int32_t> out) const override;

  // Which source sample `index` comes from, and its index there.
  int source_of(std::int64_t index) const { return source_of_sample_[static_cast<std::size_t>(index)]; }
  std::int64_t index_in_source(std::int64_t index) const { return index_in_source_[static_cast<std::size_t>(index)]; }

 private:
  std::vector<std::shared_ptr<const SampleSource>> sources_;
  int seq_length_ = 0;
  std::vector<std::uint16_t> source_of_sample_;
  std::vector<std::int64_t> index_in_source_;
};

}  // namespace adamant::data

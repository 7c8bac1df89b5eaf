#include "adamant/data/blended_dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "adamant/core/error.h"

namespace adamant::data {

std::vector<double> normalize_blend_weights(std::span<const double> weights) {
  ADAMANT_CHECK(!weights.empty(),
                "model.data.data_prefix: no datasets; give [weight1, prefix1, weight2, prefix2, ...]");
  double sum = 0.0;
  for (const double weight : weights) {
    ADAMANT_CHECK(std::isfinite(weight) && weight >= 0.0,
                  "model.data.data_prefix: blend weight {} must be a finite non-negative number", weight);
    sum += weight;
  }
  ADAMANT_CHECK(sum > 0.0, "model.data.data_prefix: the blend weights sum to 0; give at least one a positive weight");
  std::vector<double> normalized;
  normalized.reserve(weights.size());
  for (const double weight : weights) normalized.push_back(weight / sum);
  return normalized;
}

std::vector<std::int64_t> blended_source_sample_counts(std::span<const double> normalized_weights, std::int64_t total) {
  std::vector<std::int64_t> counts;
  counts.reserve(normalized_weights.size());
  for (const double weight : normalized_weights) {
    counts.push_back(static_cast<std::int64_t>(std::ceil(static_cast<double>(total) * weight * 1.005)));
  }
  return counts;
}

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const SampleSource>> sources,
                               std::span<const double> weights, std::int64_t size)
    : sources_(std::move(sources)) {
  ADAMANT_CHECK(!sources_.empty() && sources_.size() == weights.size(),
                "BlendedDataset: {} sources but {} weights; model.data.data_prefix pairs each prefix with a weight",
                sources_.size(), weights.size());
  ADAMANT_CHECK(sources_.size() <= std::numeric_limits<std::uint16_t>::max(), "BlendedDataset: too many sources ({})",
                sources_.size());
  ADAMANT_CHECK(size >= 0, "BlendedDataset: negative size {}", size);
  for (const auto& source : sources_) ADAMANT_CHECK(source != nullptr, "BlendedDataset: a source is missing");
  seq_length_ = sources_.front()->seq_length();
  for (const auto& source : sources_) {
    ADAMANT_CHECK(source->seq_length() == seq_length_, "BlendedDataset: sources have seq_length {} and {}", seq_length_,
                  source->seq_length());
  }
  const std::vector<double> normalized = normalize_blend_weights(weights);

  source_of_sample_.resize(static_cast<std::size_t>(size));
  index_in_source_.resize(static_cast<std::size_t>(size));
  std::vector<std::int64_t> taken(sources_.size(), 0);
  for (std::int64_t sample = 0; sample < size; ++sample) {
    // Megatron measures the lag against max(sample, 1), so sample 0 goes to the heaviest source.
    const double target = static_cast<double>(std::max<std::int64_t>(sample, 1));
    std::size_t best = 0;
    double best_lag = normalized[0] * target - static_cast<double>(taken[0]);
    for (std::size_t s = 1; s < sources_.size(); ++s) {
      const double lag = normalized[s] * target - static_cast<double>(taken[s]);
      if (lag > best_lag) {
        best_lag = lag;
        best = s;
      }
    }
    source_of_sample_[static_cast<std::size_t>(sample)] = static_cast<std::uint16_t>(best);
    index_in_source_[static_cast<std::size_t>(sample)] = taken[best]++;
  }
  for (std::size_t s = 0; s < sources_.size(); ++s) {
    ADAMANT_CHECK(taken[s] <= sources_[s]->size(),
                  "BlendedDataset: source {} (weight {}) must supply {} samples but holds {}; build it with "
                  "blended_source_sample_counts()",
                  s, normalized[s], taken[s], sources_[s]->size());
  }
}

void BlendedDataset::read_sample(std::int64_t index, std::span<std::int32_t> out) const {
  ADAMANT_CHECK(index >= 0 && index < size(), "BlendedDataset: sample {} out of range (it has {})", index, size());
  const auto i = static_cast<std::size_t>(index);
  sources_[source_of_sample_[i]]->read_sample(index_in_source_[i], out);
}

}  // namespace adamant::data

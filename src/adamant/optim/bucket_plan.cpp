#include "adamant/optim/bucket_plan.h"

#include <algorithm>
#include <cmath>

#include "adamant/core/error.h"

namespace adamant::optim {

namespace {

std::size_t round_up(std::size_t value, std::size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

std::size_t BucketPlan::capacity_for(double bucket_cap_mb, std::size_t grad_element_bytes) {
  ADAMANT_CHECK(bucket_cap_mb > 0 && std::isfinite(bucket_cap_mb),
                "model.optim.bucket_cap_mb={} must be a positive number of MiB (Apex's default is 100)", bucket_cap_mb);
  const double elements = std::floor(bucket_cap_mb * 1024.0 * 1024.0 / static_cast<double>(grad_element_bytes));
  return std::max<std::size_t>(1, static_cast<std::size_t>(elements));
}

BucketPlan::BucketPlan(const ParamList& params, std::size_t capacity_elements, int shards) : shards_(shards) {
  ADAMANT_CHECK(shards >= 1, "bucket plan for {} data-parallel ranks: need at least one", shards);
  ADAMANT_CHECK(params.size() > 0, "the optimizer received an empty parameter list; the model has no weights");
  const std::size_t granule = static_cast<std::size_t>(shards) * kShardAlignment;
  capacity_ = round_up(std::max<std::size_t>(capacity_elements, 1), granule);

  std::size_t end_of_params = 0;
  for (std::size_t p = 0; p < params.size(); ++p) {
    const ParamSpec& spec = params[p];
    ADAMANT_CHECK(spec.offset >= end_of_params,
                  "parameter '{}' starts at element {}, inside the previous parameter (which ends at {}); the "
                  "optimizer needs the parameters in flat-buffer order without overlap",
                  spec.name, spec.offset, end_of_params);
    end_of_params = spec.offset + spec.numel;
  }
  ADAMANT_CHECK(end_of_params <= params.total_numel, "parameters end at element {} but total_numel is {}",
                end_of_params, params.total_numel);
  const std::size_t total = std::max<std::size_t>(params.total_numel, 1);

  first_bucket_.assign(params.size(), 1);
  last_bucket_.assign(params.size(), 0);
  std::size_t first_param = 0;  // first parameter that may still reach into the current bucket
  for (std::size_t bucket_begin = 0; bucket_begin < total; bucket_begin += capacity_) {
    Bucket bucket;
    bucket.offset = bucket_begin;
    bucket.numel = std::min(capacity_, round_up(total - bucket_begin, granule));
    bucket.shard_numel = bucket.numel / static_cast<std::size_t>(shards);
    const std::size_t bucket_end = bucket_begin + bucket.numel;
    const std::size_t index = buckets_.size();
    while (first_param < params.size() && params[first_param].offset + params[first_param].numel <= bucket_begin) {
      ++first_param;
    }
    for (std::size_t p = first_param; p < params.size() && params[p].offset < bucket_end; ++p) {
      const ParamSpec& spec = params[p];
      const std::size_t begin = std::max(spec.offset, bucket_begin);
      const std::size_t end = std::min(spec.offset + spec.numel, bucket_end);
      if (begin >= end) continue;  // empty parameter
      Fragment fragment;
      fragment.param = p;
      fragment.param_offset = begin - spec.offset;
      fragment.bucket_offset = begin - bucket_begin;
      fragment.numel = end - begin;
      fragment.first_shard = static_cast<int>(fragment.bucket_offset / bucket.shard_numel);
      fragment.last_shard = static_cast<int>((fragment.bucket_offset + fragment.numel - 1) / bucket.shard_numel);
      bucket.fragments.push_back(fragment);
      if (first_bucket_[p] > last_bucket_[p]) first_bucket_[p] = index;
      last_bucket_[p] = index;
    }
    shard_state_offsets_.push_back(shard_numel_total_);
    shard_numel_total_ += bucket.shard_numel;
    padded_numel_ = bucket_end;
    buckets_.push_back(std::move(bucket));
  }
}

std::vector<ShardFragment> BucketPlan::shard_fragments(std::size_t bucket_index, int shard) const {
  ADAMANT_CHECK(bucket_index < buckets_.size() && shard >= 0 && shard < shards_,
                "bucket {} shard {} out of range ({} buckets, {} shards)", bucket_index, shard, buckets_.size(),
                shards_);
  const Bucket& bucket = buckets_[bucket_index];
  const std::size_t shard_begin = static_cast<std::size_t>(shard) * bucket.shard_numel;
  const std::size_t shard_end = shard_begin + bucket.shard_numel;
  std::vector<ShardFragment> pieces;
  for (const Fragment& fragment : bucket.fragments) {
    if (shard < fragment.first_shard || shard > fragment.last_shard) continue;
    const std::size_t begin = std::max(fragment.bucket_offset, shard_begin);
    const std::size_t end = std::min(fragment.bucket_offset + fragment.numel, shard_end);
    pieces.push_back(
        {fragment.param, fragment.param_offset + (begin - fragment.bucket_offset), begin - shard_begin, end - begin});
  }
  return pieces;
}

}  // namespace adamant::optim

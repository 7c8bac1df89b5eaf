#pragma once
// How the flat gradient buffer is cut into communication buckets and each bucket
// into one shard per data-parallel rank (docs/distributed_fused_adam.md, "Buckets and shards").
//
// Parameters keep their places in the model's flat buffers (ParamList order,
// which is the order gradients become final in backward). Buckets cut that flat
// range into pieces of exactly `capacity` elements, so a parameter that does not
// fit is split into fragments across buckets and no padding ever falls inside a
// parameter; only the last bucket is padded, to a multiple of shards * 64
// elements. Every bucket is split into `shards` equal shards whose size is a
// multiple of 64 elements (128 bytes of bf16). A shard may hold pieces of several
// parameters, or only padding when a bucket has fewer weights than ranks.
#include <cstddef>
#include <vector>

#include "adamant/core/param_spec.h"

namespace adamant::optim {

// A piece of one parameter inside one bucket.
struct Fragment {
  std::size_t param = 0;          // index in the ParamList
  std::size_t param_offset = 0;   // first element of the piece within the parameter
  std::size_t bucket_offset = 0;  // where the piece starts within the bucket
  std::size_t numel = 0;
  int first_shard = 0;  // the piece lies in shards [first_shard, last_shard] of its bucket
  int last_shard = 0;
};

struct Bucket {
  std::size_t offset = 0;           // first element in the model's flat buffers
  std::size_t numel = 0;            // the capacity, or less for the (padded) last bucket
  std::size_t shard_numel = 0;      // numel / shards
  std::vector<Fragment> fragments;  // in flat order
};

// A piece of one parameter inside one shard of one bucket.
struct ShardFragment {
  std::size_t param = 0;
  std::size_t param_offset = 0;
  std::size_t shard_offset = 0;  // relative to the shard's first element
  std::size_t numel = 0;
};

class BucketPlan {
 public:
  static constexpr std::size_t kShardAlignment = 64;  // elements: 128 bytes of bf16

  // `capacity_elements` is rounded up to a multiple of shards * 64. Parameters must be sorted by offset and
  // must not overlap; gaps between them (if a model has any) are treated like padding.
  BucketPlan(const ParamList& params, std::size_t capacity_elements, int shards);

  // Elements in bucket_cap_mb MiB of gradients of `grad_element_bytes` each (at least 1).
  static std::size_t capacity_for(double bucket_cap_mb, std::size_t grad_element_bytes);

  int shards() const { return shards_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t padded_numel() const { return padded_numel_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Parameter p lies in buckets [first_bucket(p), last_bucket(p)] (empty parameters: first > last).
  std::size_t first_bucket(std::size_t param) const { return first_bucket_[param]; }
  std::size_t last_bucket(std::size_t param) const { return last_bucket_[param]; }

  // The pieces of parameters in shard `shard` of bucket `bucket`, in order.
  std::vector<ShardFragment> shard_fragments(std::size_t bucket, int shard) const;
  // Elements of one rank's shards over all buckets: the size of its optimizer state.
  std::size_t shard_numel_total() const { return shard_numel_total_; }
  // Where bucket b's shard starts in a rank's optimizer state (the concatenation of its shards).
  std::size_t shard_state_offset(std::size_t bucket) const { return shard_state_offsets_[bucket]; }

 private:
  int shards_ = 1;
  std::size_t capacity_ = 0;
  std::size_t padded_numel_ = 0;
  std::size_t shard_numel_total_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> first_bucket_, last_bucket_;
  std::vector<std::size_t> shard_state_offsets_;
};

}  // namespace adamant::optim

#include "adamant/optim/update_ranges.h"

namespace adamant::optim {

UpdateRanges UpdateRanges::whole_model(const ParamList& params, std::size_t padded_numel,
                                       const GradNormScope& norm_scope) {
  std::vector<ShardFragment> pieces;
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (params[p].numel > 0) pieces.push_back({p, 0, params[p].offset, params[p].numel});
  }
  UpdateRanges ranges;
  ranges.add(params, norm_scope, 0, padded_numel, pieces);
  return ranges;
}

UpdateRanges UpdateRanges::rank_shards(const BucketPlan& plan, const ParamList& params, int rank,
                                       const GradNormScope& norm_scope) {
  UpdateRanges ranges;
  for (std::size_t b = 0; b < plan.buckets().size(); ++b) {
    const Bucket& bucket = plan.buckets()[b];
    ranges.add(params, norm_scope, bucket.offset + static_cast<std::size_t>(rank) * bucket.shard_numel,
               bucket.shard_numel, plan.shard_fragments(b, rank));
  }
  return ranges;
}

void UpdateRanges::add(const ParamList& params, const GradNormScope& norm_scope, std::size_t flat_offset,
                       std::size_t numel, std::span<const ShardFragment> pieces) {
  UpdateRange range;
  range.flat_offset = flat_offset;
  range.state_offset = state_numel_;
  range.numel = numel;
  range.segment_begin = segments_.size();
  range.norm_segment_begin = norm_segments_.size();
  for (const ShardFragment& piece : pieces) {
    const auto begin = static_cast<std::int64_t>(piece.shard_offset);
    const auto end = static_cast<std::int64_t>(piece.shard_offset + piece.numel);
    const ParamSpec& spec = params[piece.param];
    segments_.insert(segments_.end(), {begin, end, spec.weight_decay ? 1 : 0});
    if (norm_scope.counts(spec)) norm_segments_.insert(norm_segments_.end(), {begin, end, 0});
    pieces_.push_back({piece.param, piece.param_offset, range.state_offset + piece.shard_offset, piece.numel});
  }
  range.segment_count = segments_.size() - range.segment_begin;
  range.norm_segment_count = norm_segments_.size() - range.norm_segment_begin;
  ranges_.push_back(range);
  state_numel_ += numel;
}

std::vector<int> UpdateRanges::sms_beside_forward(const ParamList& params, int update_sms) const {
  std::vector<int> sms(ranges_.size(), update_sms);
  if (params.size() == 0) return sms;
  const ParamSpec& read_first = params[params.size() - 1];
  for (std::size_t r = 0; r < ranges_.size(); ++r) {
    const UpdateRange& range = ranges_[r];
    if (range.flat_offset < read_first.offset + read_first.numel &&
        read_first.offset < range.flat_offset + range.numel) {
      sms[r] = 0;
    }
  }
  return sms;
}

}  // namespace adamant::optim

#pragma once
// The ranges of the model's flat buffers that one rank's Adam updates, and their
// segment tables: FusedAdam updates the whole buffer as one range, DistributedFusedAdam
// this rank's shard of every bucket (one range per bucket).
//
// A range's segments are (begin, end, decay) i64 triples relative to the range's first
// element, the format of kernels/adam.h and kernels/reduce.h; the norm segments are those
// of the parameters that count in the grad norm on this rank (grad_norm_scope.h). A
// range also has its place in the rank's optimizer state, where its pieces of parameters
// are what the checkpoint stores (StatePiece).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "adamant/core/param_spec.h"
#include "adamant/optim/bucket_plan.h"
#include "adamant/optim/grad_norm_scope.h"
#include "adamant/optim/optimizer_checkpoint.h"

namespace adamant::optim {

struct UpdateRange {
  std::size_t flat_offset = 0;   // first element in the model's flat buffers
  std::size_t state_offset = 0;  // first element in this rank's optimizer state
  std::size_t numel = 0;
  std::size_t segment_begin = 0;  // first i64 of its triples in segments()
  std::size_t segment_count = 0;  // number of i64 values (3 per segment)
  std::size_t norm_segment_begin = 0;
  std::size_t norm_segment_count = 0;
};

class UpdateRanges {
 public:
  // One range over all padded_numel elements, one segment per non-empty parameter.
  static UpdateRanges whole_model(const ParamList& params, std::size_t padded_numel, const GradNormScope& norm_scope);
  // One range per bucket: shard `rank` of it, state offsets as BucketPlan::shard_state_offset.
  static UpdateRanges rank_shards(const BucketPlan& plan, const ParamList& params, int rank,
                                  const GradNormScope& norm_scope);

  std::size_t size() const { return ranges_.size(); }
  const UpdateRange& operator[](std::size_t index) const { return ranges_[index]; }
  const std::vector<UpdateRange>& ranges() const { return ranges_; }
  // Elements of optimizer state on this rank: the ranges' sizes added up.
  std::size_t state_numel() const { return state_numel_; }
  // Every range's triples, concatenated in range order (host memory).
  const std::vector<std::int64_t>& segments() const { return segments_; }
  const std::vector<std::int64_t>& norm_segments() const { return norm_segments_; }
  // Which range of which parameter lies where in the optimizer state: the checkpoint's pieces.
  const std::vector<StatePiece>& state_pieces() const { return pieces_; }
  // The SMs each range's Adam runs on beside the next forward (kernels::adam_step_remainder's
  // sm_count): every SM (0) for the ranges holding the weight the forward reads first (the last in
  // flat order), since the forward can start nothing before them; update_sms for the others.
  std::vector<int> sms_beside_forward(const ParamList& params, int update_sms) const;

 private:
  UpdateRanges() = default;
  // Appends a range at the end of the state; `pieces` are its parameters' pieces, offsets relative to the range.
  void add(const ParamList& params, const GradNormScope& norm_scope, std::size_t flat_offset, std::size_t numel,
           std::span<const ShardFragment> pieces);

  std::vector<UpdateRange> ranges_;
  std::vector<std::int64_t> segments_, norm_segments_;
  std::vector<StatePiece> pieces_;
  std::size_t state_numel_ = 0;
};

}  // namespace adamant::optim

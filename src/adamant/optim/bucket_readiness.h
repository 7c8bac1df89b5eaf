#pragma once
// Tracks, during the last micro-batch's backward, which buckets have all their
// gradients final, so that each bucket's sync starts as soon as it can.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "adamant/core/param_spec.h"
#include "adamant/optim/bucket_plan.h"

namespace adamant::optim {

class BucketReadiness {
 public:
  BucketReadiness(const BucketPlan& plan, const ParamList& params);

  // Parameter `param`'s gradient is final. Throws if it was already marked this step or is out of range.
  void mark_ready(std::size_t param);
  bool complete(std::size_t bucket) const { return pending_[bucket] == 0; }
  void reset();  // for the next step

 private:
  const BucketPlan& plan_;
  const ParamList& params_;
  std::vector<std::size_t> fragment_count_;  // fragments per bucket
  std::vector<std::size_t> pending_;         // fragments whose parameter is not final yet
  std::vector<std::uint8_t> ready_;          // per parameter, this step
};

}  // namespace adamant::optim

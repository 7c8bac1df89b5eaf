#include "adamant/optim/bucket_readiness.h"

#include <algorithm>

#include "adamant/core/error.h"

namespace adamant::optim {

BucketReadiness::BucketReadiness(const BucketPlan& plan, const ParamList& params)
    : plan_(plan), params_(params), ready_(params.size(), 0) {
  for (const Bucket& bucket : plan.buckets()) fragment_count_.push_back(bucket.fragments.size());
  pending_ = fragment_count_;
}

void BucketReadiness::mark_ready(std::size_t param) {
  ADAMANT_CHECK(param < ready_.size(), "on_grad_ready({}): the model has only {} parameters", param, ready_.size());
  ADAMANT_CHECK(ready_[param] == 0,
                "on_grad_ready: gradient of '{}' reported twice in one step; call it once per parameter during the "
                "last micro-batch's backward",
                params_[param].name);
  ready_[param] = 1;
  if (plan_.first_bucket(param) > plan_.last_bucket(param)) return;  // empty parameter
  for (std::size_t b = plan_.first_bucket(param); b <= plan_.last_bucket(param); ++b) --pending_[b];
}

void BucketReadiness::reset() {
  std::copy(fragment_count_.begin(), fragment_count_.end(), pending_.begin());
  std::fill(ready_.begin(), ready_.end(), 0);
}

}  // namespace adamant::optim

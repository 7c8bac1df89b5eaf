#include "adamant/optim/optimizer.h"

#include <cmath>

#include "adamant/core/error.h"
#include "adamant/optim/bucket_plan.h"
#include "adamant/optim/distributed_fused_adam.h"
#include "adamant/optim/fused_adam.h"

namespace adamant::optim {

Optimizer::~Optimizer() = default;

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, const ParamList& params,
                                          comm::Communicator& data_parallel, const Stream& compute_stream,
                                          GradNormScope norm_scope) {
  options.validate();
  if (options.name == "distributed_fused_adam") {
    return std::make_unique<DistributedFusedAdam>(options, params, data_parallel, compute_stream, norm_scope);
  }
  return std::make_unique<FusedAdam>(options, params, data_parallel, compute_stream, norm_scope);
}

}  // namespace adamant::optim

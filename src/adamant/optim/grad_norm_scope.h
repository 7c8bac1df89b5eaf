#pragma once
// Which gradients count in the global grad norm on this rank, and who adds the per-rank
// sums. Without tensor parallelism: every parameter, summed over the data-parallel group.
// With it, each rank's data-parallel sum covers its slice of the model only; the
// tensor-parallel group adds the other slices, and a parameter replicated over that group
// (ParamSpec::tp_duplicate: layernorms, position embeddings, row-parallel biases) counts on
// tensor-parallel rank 0 only, so that it counts once.
#include "adamant/comm/communicator.h"
#include "adamant/core/param_spec.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::optim {

struct GradNormScope {
  comm::Communicator* tensor_parallel = nullptr;  // null or a group of one: no tensor parallelism
  comm::Communicator* pipeline = nullptr;         // null or a group of one: no pipeline stages

  bool counts(const ParamSpec& spec) const {
    if (spec.tied_copy) return false;
    return tensor_parallel == nullptr || tensor_parallel->rank() == 0 || !spec.tp_duplicate;
  }
  // After the data-parallel sum of `squared_norm` (one fp64 on the stream's device), in stream order.
  void add_model_parallel_ranks(Tensor squared_norm, const Stream& stream) const {
    for (comm::Communicator* group : {tensor_parallel, pipeline}) {
      if (group == nullptr || group->size() == 1) continue;
      group->order_after(stream);
      group->all_reduce_async(squared_norm, comm::ReduceOp::sum).wait(stream);
    }
  }
};

}  // namespace adamant::optim

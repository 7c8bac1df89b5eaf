#pragma once
// Argument checks shared by every backend, so that a wrong size, device or
// dtype fails with the same clear message whichever backend is in use.
#include <string_view>

#include "adamant/comm/communicator.h"
#include "adamant/core/tensor.h"

namespace adamant::comm {

std::string_view reduce_op_name(ReduceOp op);

// The tensor lives where `communicator` expects its buffers.
void check_tensor_device(const Tensor& tensor, const Communicator& communicator, std::string_view operation);

// avg is defined for floating types only: an integer mean would silently truncate.
void check_reduce_dtype(DType dtype, ReduceOp op, const Communicator& communicator, std::string_view operation);

// Checks the reduce-scatter contract of communicator.h; returns true when in place.
bool check_reduce_scatter_args(const Tensor& send, const Tensor& recv, const Communicator& communicator);

// Checks the all-gather contract of communicator.h; returns true when in place.
bool check_all_gather_args(const Tensor& send, const Tensor& recv, const Communicator& communicator);

void check_broadcast_root(int root, const Communicator& communicator);
// A point-to-point peer is another rank of the group.
void check_peer(int peer, const Communicator& communicator, const char* operation);

}  // namespace adamant::comm

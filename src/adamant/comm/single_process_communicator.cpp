#include "adamant/comm/single_process_communicator.h"

#include "adamant/comm/collective_checks.h"

namespace adamant::comm {

SingleProcessCommunicator::SingleProcessCommunicator(Device device) : comm_stream_(device) {}

CommHandle SingleProcessCommunicator::all_reduce_async(Tensor data, ReduceOp op) {
  check_tensor_device(data, *this, "all_reduce");
  check_reduce_dtype(data.dtype, op, *this, "all_reduce");
  // sum, avg and max over one rank are the data itself. The handle still orders
  // waiters after everything issued on the communicator before.
  return comm_stream_.completion_handle();
}

CommHandle SingleProcessCommunicator::reduce_scatter_async(Tensor send, Tensor recv, ReduceOp op) {
  const bool in_place = check_reduce_scatter_args(send, recv, *this);
  check_reduce_dtype(send.dtype, op, *this, "reduce_scatter");
  if (!in_place) copy_bytes_on_stream(recv.data, send.data, recv.bytes(), comm_stream_.stream());
  return comm_stream_.completion_handle();
}

CommHandle SingleProcessCommunicator::all_gather_async(Tensor send, Tensor recv) {
  const bool in_place = check_all_gather_args(send, recv, *this);
  if (!in_place) copy_bytes_on_stream(recv.data, send.data, send.bytes(), comm_stream_.stream());
  return comm_stream_.completion_handle();
}

CommHandle SingleProcessCommunicator::send_async(Tensor data, int peer) {
  check_tensor_device(data, *this, "send");
  check_peer(peer, *this, "send");
  return CommHandle();
}

CommHandle SingleProcessCommunicator::recv_async(Tensor data, int peer) {
  check_tensor_device(data, *this, "recv");
  check_peer(peer, *this, "recv");
  return CommHandle();
}

CommHandle SingleProcessCommunicator::broadcast_async(Tensor data, int root) {
  check_tensor_device(data, *this, "broadcast");
  check_broadcast_root(root, *this);
  return comm_stream_.completion_handle();
}

void SingleProcessCommunicator::barrier() { comm_stream_.stream().synchronize(); }

}  // namespace adamant::comm

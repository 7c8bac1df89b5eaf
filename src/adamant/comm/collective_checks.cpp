#include "adamant/comm/collective_checks.h"

#include <cstdint>

#include "adamant/core/error.h"

namespace adamant::comm {

namespace {

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16 || dtype == DType::f16;
}

bool bytes_overlap(const Tensor& a, const Tensor& b) {
  const auto a_begin = reinterpret_cast<std::uintptr_t>(a.data);
  const auto b_begin = reinterpret_cast<std::uintptr_t>(b.data);
  return a_begin < b_begin + b.bytes() && b_begin < a_begin + a.bytes();
}

void check_same_dtype(const Tensor& send, const Tensor& recv, const Communicator& communicator,
                      std::string_view operation) {
  ADAMANT_CHECK(send.dtype == recv.dtype, "{} {}: send is {} but recv is {}; both must have the same dtype",
                communicator.backend_name(), operation, dtype_name(send.dtype), dtype_name(recv.dtype));
}

}  // namespace

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

void check_tensor_device(const Tensor& tensor, const Communicator& communicator, std::string_view operation) {
  const Device expected = communicator.device();
  if (tensor.device == expected) return;
  if (expected.is_cpu()) {
    fail(
        "{} {}: got a tensor in {} memory, but this backend works on host memory only; use an NCCL "
        "communicator for GPU buffers (make_device_communicator with a CUDA device) or copy to the host",
        communicator.backend_name(), operation, tensor.device.str());
  }
  fail("{} {}: got a tensor on {}, but this communicator was created for {}; pass buffers on {}",
       communicator.backend_name(), operation, tensor.device.str(), expected.str(), expected.str());
}

void check_reduce_dtype(DType dtype, ReduceOp op, const Communicator& communicator, std::string_view operation) {
  ADAMANT_CHECK(op != ReduceOp::avg || is_floating(dtype),
                "{} {}: avg of {} tensors is not supported (it would truncate); use sum and divide, or a "
                "floating dtype",
                communicator.backend_name(), operation, dtype_name(dtype));
}

bool check_reduce_scatter_args(const Tensor& send, const Tensor& recv, const Communicator& communicator) {
  constexpr std::string_view kOperation = "reduce_scatter";
  check_tensor_device(send, communicator, kOperation);
  check_tensor_device(recv, communicator, kOperation);
  check_same_dtype(send, recv, communicator, kOperation);
  const std::size_t n = recv.numel();
  const auto size = static_cast<std::size_t>(communicator.size());
  ADAMANT_CHECK(send.numel() == size * n,
                "{} reduce_scatter: send has {} elements but must have size() * recv.numel() = {} * {} = {}",
                communicator.backend_name(), send.numel(), size, n, size * n);
  const Tensor own_block = send.slice(static_cast<std::size_t>(communicator.rank()) * n, n);
  if (recv.data == own_block.data) return true;
  ADAMANT_CHECK(n == 0 || !bytes_overlap(send, recv),
                "{} reduce_scatter: recv overlaps send without being this rank's block (rank {}); pass "
                "disjoint buffers or recv = send.slice(rank * n, n) for in place",
                communicator.backend_name(), communicator.rank());
  return false;
}

bool check_all_gather_args(const Tensor& send, const Tensor& recv, const Communicator& communicator) {
  constexpr std::string_view kOperation = "all_gather";
  check_tensor_device(send, communicator, kOperation);
  check_tensor_device(recv, communicator, kOperation);
  check_same_dtype(send, recv, communicator, kOperation);
  const std::size_t n = send.numel();
  const auto size = static_cast<std::size_t>(communicator.size());
  ADAMANT_CHECK(recv.numel() == size * n,
                "{} all_gather: recv has {} elements but must have size() * send.numel() = {} * {} = {}",
                communicator.backend_name(), recv.numel(), size, n, size * n);
  const Tensor own_block = recv.slice(static_cast<std::size_t>(communicator.rank()) * n, n);
  if (send.data == own_block.data) return true;
  ADAMANT_CHECK(n == 0 || !bytes_overlap(send, recv),
                "{} all_gather: send overlaps recv without being this rank's block (rank {}); pass "
                "disjoint buffers or send = recv.slice(rank * n, n) for in place",
                communicator.backend_name(), communicator.rank());
  return false;
}

void check_broadcast_root(int root, const Communicator& communicator) {
  ADAMANT_CHECK(root >= 0 && root < communicator.size(), "{} broadcast: root {} is outside the group of {} ranks",
                communicator.backend_name(), root, communicator.size());
}

void check_peer(int peer, const Communicator& communicator, const char* operation) {
  ADAMANT_CHECK(peer >= 0 && peer < communicator.size() && peer != communicator.rank(),
                "{} {}: peer {} is not another rank of this group of {} ranks (this is rank {})",
                communicator.backend_name(), operation, peer, communicator.size(), communicator.rank());
}

}  // namespace adamant::comm

#pragma once
// Reductions used by the optimizer: squared L2 norms and non-finite checks.
#include <climits>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

namespace cpu {
void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate);
}  // namespace cpu

namespace cuda {
void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate, Workspace& workspace,
                  const Stream& stream);
}  // namespace cuda

namespace detail {

inline void check_segments(const KernelCall& call, const Tensor& segments) {
  ADAMANT_CHECK(segments.dtype == DType::i64 && segments.numel() % 3 == 0, "{}: segments must be i64 triples",
                call.op());
  ADAMANT_CHECK(segments.numel() / 3 <= static_cast<std::size_t>(INT_MAX), "{}: {} segments, at most {}", call.op(),
                segments.numel() / 3, INT_MAX);
  call.same_device("segments", segments);
}

}  // namespace detail

// out (one fp64 on x's device) = sum of x[i]^2 over the given segments (same i64
// triple format as adam.h; the decay flag is ignored), plus out's old value when
// accumulate. x: fp32 or bf16. Non-finite inputs make the result non-finite.
// fp64 out: the optimizers add buckets and ranks to it and round the norm once. The
// partial sums go to `workspace` (made with WorkspaceNeeds::squared_norm).
inline void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate, Workspace& workspace,
                         const Stream& stream) {
  const KernelCall call("squared_norm", x, stream);
  call.uses(workspace);
  ADAMANT_CHECK(workspace.needs().squared_norm,
                "squared_norm: the workspace has no partial sums; make it with WorkspaceNeeds::squared_norm set");
  ADAMANT_CHECK(x.dtype == DType::f32 || x.dtype == DType::bf16, "squared_norm: {} input (fp32 or bf16 expected)",
                dtype_name(x.dtype));
  call.at_least("out", out, 1, DType::f64);
  detail::check_segments(call, segments);
  call.run([&] { cpu::squared_norm(x, segments, out, accumulate); },
           ADAMANT_CUDA_CALL(cuda::squared_norm(x, segments, out, accumulate, workspace, stream)));
}

}  // namespace adamant::kernels

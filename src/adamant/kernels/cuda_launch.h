#pragma once
// Plain launch arguments that the dispatchers (kernels/*.h) hand to the CUDA
// launchers defined in kernels/cuda/*.cu. No Tensor, fmt or CUDA header here, so
// both the host compiler and nvcc read it.
#include <cstdint>

namespace adamant::kernels {

// Where and how a CUDA launcher runs: KernelCall::run makes the operands' GPU
// current and fills in the stream and the GPU's multiprocessor count.
struct CudaLaunch {
  void* stream = nullptr;  // cudaStream_t; null is the default stream
  int multiprocessors = 1;
  // Every operand the kernel reads or writes with vector accesses is aligned for them.
  bool vectorized = false;

  constexpr CudaLaunch vectorized_if(bool aligned) const {
    CudaLaunch launch = *this;
    launch.vectorized = aligned;
    return launch;
  }
};

// Where an element-wise CUDA launcher also sums the columns of its output as it writes
// it (a linear layer's bias gradient: kernels/linear.h, BiasGradOut): fp32 sums of the
// `columns` columns of each row, and fp32 scratch for partial sums.
struct ColumnSumsOut {
  float* sums = nullptr;  // null: no sums
  std::int64_t columns = 0;
  float* scratch = nullptr;
  std::int64_t scratch_floats = 0;
};

// The fields of kernels::DropoutArgs that the CUDA dropout launcher reads.
struct DropoutParams {
  float probability = 0.0f;
  float keep_scale = 1.0f;  // 1 / (1 - probability) rounded to fp32, as the CPU kernel computes it
  std::uint64_t seed = 0;
  std::uint64_t first_sample_index = 0;
  const std::uint64_t* sample_offset = nullptr;  // device memory, added to first_sample_index when set
  std::uint32_t site = 0;
  std::uint64_t first_element = 0;  // a multiple of 4
};

}  // namespace adamant::kernels

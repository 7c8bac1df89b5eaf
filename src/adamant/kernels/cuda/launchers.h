#pragma once
// Plain launch functions behind the CUDA optimizer kernels: raw pointers, sizes
// and a stream, no Tensor or fmt, so that nvcc compiles the *.cu files without
// the C++20 library headers (fmt 9's compile-time format checks do not build
// under nvcc). optimizer_kernels_cuda.cpp checks the Tensors and calls these;
// each returns the launch status for the caller to turn into an adamant::Error.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/dtype.h"
#include "adamant/kernels/step_factor.h"

namespace adamant::kernels::cuda::launchers {

// The model weight copy the Adam kernel writes after the update.
enum class ModelCopy : std::uint8_t { none, bf16, f16, f32 };

struct AdamConstants {
  float lr;
  float beta1;
  float beta2;
  float one_minus_beta1;
  float one_minus_beta2;
  float eps;
  float weight_decay;
  float bias_correction1;  // 1 - beta1^step
  float bias_correction2;  // 1 - beta2^step
  float grad_scale;
  bool adamw;
  // Null, or the step's factor on the device (kernels::AdamArgs::step_factor): [grad scale, skip].
  const float* step_factor;
};

struct AdamOperands {
  const std::int64_t* segments;  // (begin, end, decay) triples, on the device
  int num_segments;
  std::int64_t numel;
  const void* grad;          // fp32 or bf16
  float* main_param;         // fp32 main weights; nullptr in remainder mode
  std::uint16_t* remainder;  // low halves in remainder mode, else nullptr
  float* exp_avg;
  float* exp_avg_sq;
  void* model_param;  // the weight copy, or nullptr
};

// Grid geometry the kernels need from the host (queried once per call).
struct LaunchShape {
  int multiprocessors;
  bool vectorized;  // every operand aligned for 4-element vector accesses
};

// remainder mode needs model == ModelCopy::bf16.
cudaError_t adam(const AdamOperands& operands, DType grad_dtype, ModelCopy model, bool remainder,
                 const AdamConstants& constants, LaunchShape shape, cudaStream_t stream);

// Remainder mode on `blocks` SMs (one block each), the operands moved by bulk copies
// (adam_bulk.cu): for an update beside other kernels. Needs every operand 16-byte aligned
// (cudaErrorInvalidValue otherwise).
cudaError_t adam_bulk(const AdamOperands& operands, DType grad_dtype, const AdamConstants& constants, int blocks,
                      cudaStream_t stream);

// factor = [adam grad scale, skip] from the squared norm (kernels::resolve_step_factor), by one thread.
cudaError_t resolve_step_factor(const double* squared_norm, const StepFactorInputs& inputs, float* factor,
                                cudaStream_t stream);

// The number of partial sums squared_norm uses for numel elements of x_dtype (the size of
// `partials` it needs, at most kMaxSquaredNormPartials); fixed by numel and dtype alone so
// the summation order never changes. 528 = 4 blocks on each of an H200's 132
// multiprocessors, so that every block of the reduction runs at once.
constexpr int kMaxSquaredNormPartials = 528;
int squared_norm_partials(std::int64_t numel, DType x_dtype);
cudaError_t squared_norm(const void* x, DType x_dtype, std::int64_t numel, const std::int64_t* segments,
                         int num_segments, double* partials, double* out, bool accumulate, LaunchShape shape,
                         cudaStream_t stream);

cudaError_t cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::int64_t numel, LaunchShape shape,
                 cudaStream_t stream);
cudaError_t scale(void* x, DType dtype, float factor, std::int64_t numel, LaunchShape shape, cudaStream_t stream);
// dst += src: fp32 or bf16 into fp32, or fp32 into bf16 (each sum rounded once).
cudaError_t accumulate(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::int64_t numel,
                       LaunchShape shape, cudaStream_t stream);

}  // namespace adamant::kernels::cuda::launchers

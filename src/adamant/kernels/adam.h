#pragma once
// Multi-tensor fused Adam over one flat shard (docs/distributed_fused_adam.md, "A step"). CPU reference
// in kernels/cpu/, CUDA in kernels/cuda/; both take the same arguments.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

struct AdamArgs {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // applied only to segments whose decay flag is 1
  bool adamw = true;          // decoupled decay; false = L2 (wd*p added to the gradient)
  std::int64_t step = 1;      // 1-based, for the bias corrections
  float grad_scale = 1.0f;    // every gradient is multiplied by this first (averaging, unscale, clip)
};

// Segments: an i64 tensor of 3*k values (begin, end, decay) on the shard's device,
// sorted, non-overlapping, element offsets within the shard. Elements outside
// every segment (padding) are left untouched.
//
// Per element in a segment, in fp32:
//   g = grad * grad_scale; if (!adamw) g += wd*p
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//   denom = sqrt(v / (1 - b2^step)) + eps
//   u = (m / (1 - b1^step)) / denom;  if (adamw) u += wd*p
//   p -= lr*u;  model_param = round(p)
// The bf16 model copy is rounded half away from zero on the fp32 bit pattern
// (bf16_round_for_remainder) so stored remainders reproduce p exactly; fp16 rounds to nearest even.

// main_param, exp_avg, exp_avg_sq: fp32. grad: fp32 or bf16. model_param: bf16, fp16 or fp32 copy
// to write, or an empty Tensor (data == nullptr) when main_param is the model weight itself.
void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param, const Stream& stream);

// store_param_remainders: the fp32 main weight is (model_param bf16 high half, remainder low half).
// remainder: u16 (a signed 16-bit offset); model_param: bf16, read and written.
void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream);

}  // namespace adamant::kernels

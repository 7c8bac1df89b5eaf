#pragma once
// CUDA entry points for the optimizer kernels; called only through the
// dispatchers in kernels/*.cpp, which check devices and dtypes first.
#include "adamant/kernels/adam.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"

namespace adamant::kernels::cuda {

void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param, const Stream& stream);
void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream);
void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate, const Stream& stream);
void cast(const Tensor& src, Tensor dst, const Stream& stream);
void fill_zero(Tensor x, const Stream& stream);
void scale(Tensor x, float s, const Stream& stream);
void accumulate(const Tensor& src, Tensor dst, const Stream& stream);

}  // namespace adamant::kernels::cuda

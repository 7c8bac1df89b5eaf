#pragma once
// CPU reference implementations of the optimizer kernels (the readable versions
// the CUDA kernels are tested against).
#include "adamant/kernels/adam.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"

namespace adamant::kernels::cpu {

void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param);
void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param);
void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate);
void cast(const Tensor& src, Tensor dst);
void fill_zero(Tensor x);
void scale(Tensor x, float s);
void accumulate(const Tensor& src, Tensor dst);

}  // namespace adamant::kernels::cpu

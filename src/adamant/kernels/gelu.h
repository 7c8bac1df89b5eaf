#pragma once
// GELU in its two forms: the exact one, x * Phi(x) with the erf (PyTorch's F.gelu default, NeMo's
// default), and the tanh approximation of the original GPT-2 (NeMo's model.openai_gelu, Hugging
// Face's "gelu_new", PyTorch's approximate='tanh').
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/gelu_launchers.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels {

enum class GeluForm {
  exact,  // 0.5 x (1 + erf(x / sqrt(2)))
  tanh,   // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
};

// "exact" or "tanh": the form's name where a line or a checkpoint's header states it.
inline const char* gelu_form_name(GeluForm form) { return form == GeluForm::tanh ? "tanh" : "exact"; }

namespace cpu {
void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form);
void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, Tensor out, std::int64_t n, GeluForm form);
}  // namespace cpu

// out = gelu(x) over n elements.
inline void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form, const Stream& stream) {
  const KernelCall call = KernelCall::model("gelu_forward", x, stream);
  call.exact("x", x, n, Role::activation);
  call.exact("out", out, n, Role::activation);
  call.run([&] { cpu::gelu_forward(x, out, n, form); },
           ADAMANT_CUDA_CALL(cuda::gelu_forward(bits16_of(x), bits16_of(out), n, form == GeluForm::tanh,
                                                launch.vectorized_if(aligned_to(16, {&x, &out})))));
}

// d_x = d_out * gelu'(x); d_x may alias d_out. With a non-empty `out`, also out = gelu(x), the
// bits gelu_forward writes: the forward's output rematerialised where backward reads x anyway,
// for one more write instead of keeping it (selective recomputation). `out` may alias neither
// d_out nor d_x. With a non-empty bias.d_bias, also the bias gradient of the layer whose
// output x is: the column sums of d_x, as stored, over rows of bias.columns elements.
inline void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, GeluForm form,
                          const Stream& stream, Tensor out = {}, const BiasGradOut& bias = {}) {
  const KernelCall call = KernelCall::model("gelu_backward", x, stream);
  call.exact("d_out", d_out, n, Role::activation);
  call.exact("x", x, n, Role::activation);
  call.exact("d_x", d_x, n, Role::activation);
  const bool rematerializing = out.data != nullptr;
  if (rematerializing) {
    call.exact("out", out, n, Role::activation);
    ADAMANT_CHECK(out.data != d_out.data && out.data != d_x.data,
                  "gelu_backward: out must not alias d_out or d_x (each element would be written twice)");
  }
  const bool summing = check_bias_grad_out(call, bias, n);
  call.run(
      [&] {
        cpu::gelu_backward(d_out, x, d_x, out, n, form);
        if (summing) cpu::bias_grad(d_x, bias.d_bias, n / bias.columns, bias.columns);
      },
      ADAMANT_CUDA_CALL(cuda::gelu_backward(
          bits16_of(d_out), bits16_of(x), bits16_of(d_x), rematerializing ? bits16_of(out) : nullptr, n,
          form == GeluForm::tanh,
          launch.vectorized_if(aligned_to(16, {&d_out, &x, &d_x}) && (!rematerializing || aligned_to(16, {&out}))),
          cuda::column_sums_out(bias))));
}

}  // namespace adamant::kernels

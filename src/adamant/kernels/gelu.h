#pragma once
// GELU in its two forms: the exact one, x * Phi(x) with the erf (PyTorch's F.gelu default, NeMo's
// default), and the tanh approximation of the original GPT-2 (NeMo's model.openai_gelu, Hugging
// Face's "gelu_new", PyTorch's approximate='tanh').
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

enum class GeluForm {
  exact,  // 0.5 x (1 + erf(x / sqrt(2)))
  tanh,   // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
};

// out = gelu(x) over n elements.
void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form, const Stream& stream);
// d_x = d_out * gelu'(x); d_x may alias d_out.
void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, GeluForm form,
                   const Stream& stream);

}  // namespace adamant::kernels

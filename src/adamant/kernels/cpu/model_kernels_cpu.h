#pragma once
// CPU implementations of the model kernels (fp32 and fp64). Shapes, dtypes and
// devices were checked by the dispatcher (model_kernels.cpp); these only compute.
// Every loop that OpenMP splits writes disjoint outputs and sums in a fixed order,
// so results are bitwise reproducible run to run.
#include <cstdint>

#include "adamant/kernels/attention.h"
#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/embedding.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/residual.h"

namespace adamant::kernels::cpu {

// Loops with less work than this (elements, or multiply-adds) stay on one thread:
// waking a team costs more than it saves, especially on a busy machine.
constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 15;

// Row-major GEMM on raw pointers: CBLAS when available, else gemm_blocked.
template <typename T>
void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, const T* b, T beta, T* c);
// The portable loop version, always compiled so that tests cover it in every build.
template <typename T>
void gemm_blocked(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                  const T* a, const T* b, T beta, T* c);

void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c);
void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape);
void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, WeightGrad weight_grad);
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape);
void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape);
void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form);
void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, GeluForm form);
void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& args);
void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n);
void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape);
void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape);
void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale);
void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape);
void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape);
void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse);
void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape);

// The data of an optional operand, nullptr when it is empty (its dtype is then unset).
template <typename T>
T* optional_ptr(const Tensor& t) {
  return t.data == nullptr ? nullptr : t.ptr<T>();
}

// Calls fn.template operator()<T>() with T = float or double by the tensor's dtype.
template <typename Fn>
void with_float_type(const Tensor& t, Fn&& fn) {
  if (t.dtype == DType::f64) {
    fn.template operator()<double>();
  } else {
    fn.template operator()<float>();
  }
}

}  // namespace adamant::kernels::cpu

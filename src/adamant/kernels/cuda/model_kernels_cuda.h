#pragma once
// CUDA implementations of the model kernels, called through the dispatcher in
// kernels/model_kernels.cpp. They take the same arguments as the public kernels
// (kernels/*.h) with the GPU dtype convention below; the CPU versions in
// kernels/cpu/ are the reference they are tested against.
//
// GPU dtypes (mixed precision as in Megatron O2):
//   activations and their gradients (x, in, out, d_out, d_in, d_x): bf16
//   weights (linear weight and bias, layernorm weight and bias, word and position
//   embeddings): bf16 (the model's flat weight buffer)
//   weight gradients (d_weight, d_bias, d_word, d_position, d_embedding): fp32
//   layernorm mean and rstd, losses, logits_scratch, the vocabulary-parallel classifier's
//   stats, gathered and lse: fp32; tokens and targets: i32
// Every reduction and accumulation is done in fp32.
#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/embedding.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/residual.h"

namespace adamant::kernels::cuda {

// GEMM (cuBLASLt): a, b bf16 (or all fp32); c bf16 or fp32; fp32 accumulation.
void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c, const Stream& stream);
void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape,
                    const Stream& stream);
void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, const Stream& stream, WeightGrad weight_grad);
void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale, const Stream& stream);
void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape, const Stream& stream);
void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape, const Stream& stream);
void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse,
                            const Stream& stream);
void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape, const Stream& stream);

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream);
void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        const Stream& stream);
void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form, const Stream& stream);
void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, GeluForm form,
                   const Stream& stream);
void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& args,
             const Stream& stream);
void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n, const Stream& stream);
void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape, const Stream& stream);
void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape, const Stream& stream);

}  // namespace adamant::kernels::cuda

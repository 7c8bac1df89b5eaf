// The decoding step's linear layer and top-k selection on the CPU against independent
// references: fp64 sums over the same bf16-rounded weights with the GELU written out here,
// and top-k by repeatedly taking the largest remaining logit.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/kernels/decode.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

template <typename T>
Tensor view(std::vector<T>& v, DType dtype) {
  return Tensor::flat(v.data(), dtype, Device::cpu(), v.size());
}

double gelu_reference(double x, GeluForm form) {
  if (form == GeluForm::tanh) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
}

struct LinearCase {
  std::int64_t rows, in_features, out_features;
  std::vector<float> in, bias, residual;
  std::vector<std::uint16_t> weight;  // bf16 bits

  LinearCase(std::int64_t r, std::int64_t k, std::int64_t n) : rows(r), in_features(k), out_features(n) {
    in.resize(static_cast<std::size_t>(r * k));
    weight.resize(static_cast<std::size_t>(n * k));
    bias.resize(static_cast<std::size_t>(n));
    residual.resize(static_cast<std::size_t>(r * n));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(std::sin(0.71 * static_cast<double>(i)));
    for (std::size_t i = 0; i < weight.size(); ++i)
      weight[i] = f32_to_bf16(static_cast<float>(0.2 * std::cos(1.37 * static_cast<double>(i) + 0.3)));
    for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
    for (std::size_t i = 0; i < residual.size(); ++i) residual[i] = 0.5f - 0.01f * static_cast<float>(i % 101);
  }

  double expected(std::int64_t r, std::int64_t n, const DecodeLinearArgs& args) const {
    double sum = bias[static_cast<std::size_t>(n)];
    for (std::int64_t k = 0; k < in_features; ++k) {
      sum += static_cast<double>(in[static_cast<std::size_t>(r * in_features + k)]) *
             bf16_to_f32(weight[static_cast<std::size_t>(n * in_features + k)]);
    }
    if (args.epilogue == DecodeEpilogue::gelu) return gelu_reference(sum, args.gelu);
    if (args.epilogue == DecodeEpilogue::residual)
      return sum + residual[static_cast<std::size_t>(r * out_features + n)];
    return sum;
  }
};

using LinearFn = void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor, const LinearShape&,
                          const DecodeLinearArgs&);

void expect_linear_matches(LinearCase& c, const DecodeLinearArgs& args, LinearFn fn, const char* what) {
  kernels::Workspace workspace(Stream(), testing::all_workspace_needs());
  std::vector<float> out(static_cast<std::size_t>(c.rows * c.out_features), -7.0f);
  const LinearShape shape{c.rows, c.in_features, c.out_features};
  const Tensor weight = view(c.weight, DType::bf16);
  if (fn == nullptr) {
    decode_linear(view(c.in, DType::f32), weight, view(c.bias, DType::f32), view(c.residual, DType::f32),
                  view(out, DType::f32), shape, args, workspace, Stream{});
  } else {
    fn(view(c.in, DType::f32), weight, view(c.bias, DType::f32), view(c.residual, DType::f32), view(out, DType::f32),
       shape, args);
  }
  for (std::int64_t r = 0; r < c.rows; ++r) {
    for (std::int64_t n = 0; n < c.out_features; ++n) {
      const double expected = c.expected(r, n, args);
      ASSERT_NEAR(out[static_cast<std::size_t>(r * c.out_features + n)], expected, 2e-5 * (1.0 + std::fabs(expected)))
          << what << " rows " << c.rows << " in " << c.in_features << " row " << r << " feature " << n;
    }
  }
}

// Row counts around the vectorised loop's blocks of 4 rows; in_features with and without a tail
// past the last 8; out_features around its blocks of 4 and 2 features and the threads' 16.
TEST(DecodeLinear, Bf16WeightsMatchTheFp64Reference) {
  const std::vector<DecodeLinearArgs> epilogues{{DecodeEpilogue::none, GeluForm::exact},
                                                {DecodeEpilogue::gelu, GeluForm::exact},
                                                {DecodeEpilogue::gelu, GeluForm::tanh},
                                                {DecodeEpilogue::residual, GeluForm::exact}};
  for (const std::int64_t rows : {1, 2, 3, 4, 5, 7, 9}) {
    for (const std::int64_t in_features : {8, 43, 96}) {
      LinearCase c(rows, in_features, 37);
      for (const DecodeLinearArgs& args : epilogues) {
        expect_linear_matches(c, args, nullptr, "dispatched");
        expect_linear_matches(c, args, cpu::decode_linear_bf16_portable, "portable");
        if (cpu::decode_linear_bf16_vectorized_available())
          expect_linear_matches(c, args, cpu::decode_linear_bf16, "vectorised");
      }
    }
  }
}

TEST(DecodeLinear, Fp32WeightsAndNoBiasMatchTheReference) {
  kernels::Workspace workspace(Stream(), testing::all_workspace_needs());
  LinearCase c(3, 24, 10);
  std::vector<float> weight(c.weight.size()), out(static_cast<std::size_t>(3 * 10));
  for (std::size_t i = 0; i < weight.size(); ++i) weight[i] = bf16_to_f32(c.weight[i]);
  std::fill(c.bias.begin(), c.bias.end(), 0.0f);
  decode_linear(view(c.in, DType::f32), view(weight, DType::f32), Tensor{}, Tensor{}, view(out, DType::f32),
                {3, 24, 10}, {}, workspace, Stream{});
  for (std::int64_t r = 0; r < 3; ++r) {
    for (std::int64_t n = 0; n < 10; ++n)
      EXPECT_NEAR(out[static_cast<std::size_t>(r * 10 + n)], c.expected(r, n, {}), 1e-5) << r << " " << n;
  }
}

TEST(DecodeLinear, RefusesWrongOperands) {
  kernels::Workspace workspace(Stream(), testing::all_workspace_needs());
  LinearCase c(2, 16, 8);
  std::vector<float> out(16);
  const DecodeLinearArgs add{DecodeEpilogue::residual, GeluForm::exact};
  // The residual in out's memory.
  EXPECT_THROW(decode_linear(view(c.in, DType::f32), view(c.weight, DType::bf16), Tensor{}, view(out, DType::f32),
                             view(out, DType::f32), {2, 16, 8}, add, workspace, Stream{}),
               Error);
  // fp16 weights; an out of the wrong size.
  EXPECT_THROW(decode_linear(view(c.in, DType::f32), view(c.weight, DType::f16), Tensor{}, Tensor{},
                             view(out, DType::f32), {2, 16, 8}, {}, workspace, Stream{}),
               Error);
  EXPECT_THROW(decode_linear(view(c.in, DType::f32), view(c.weight, DType::bf16), Tensor{}, Tensor{},
                             view(out, DType::f32), {2, 16, 9}, {}, workspace, Stream{}),
               Error);
}

// The k largest by taking the largest remaining (lowest id on ties) k times.
void expect_top_k(std::vector<float>& logits, std::int64_t rows, std::int64_t stride, std::int64_t vocab,
                  std::int64_t k, std::int32_t masked) {
  std::vector<float> values(static_cast<std::size_t>(rows * k));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows * k));
  decode_top_k(view(logits, DType::f32), view(values, DType::f32), view(ids, DType::i32), rows, stride, vocab, k,
               masked, Stream{});
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<bool> taken(static_cast<std::size_t>(vocab), false);
    if (masked >= 0) taken[static_cast<std::size_t>(masked)] = true;
    for (std::int64_t i = 0; i < k; ++i) {
      std::int32_t best = -1;
      for (std::int32_t v = 0; v < vocab; ++v) {
        if (taken[static_cast<std::size_t>(v)]) continue;
        const float value = logits[static_cast<std::size_t>(r * stride + v)];
        if (best < 0 || value > logits[static_cast<std::size_t>(r * stride + best)]) best = v;
      }
      taken[static_cast<std::size_t>(best)] = true;
      ASSERT_EQ(ids[static_cast<std::size_t>(r * k + i)], best) << "row " << r << " place " << i;
      ASSERT_EQ(values[static_cast<std::size_t>(r * k + i)], logits[static_cast<std::size_t>(r * stride + best)]);
    }
  }
}

TEST(DecodeTopK, TakesTheLargestWithTiesByLowerId) {
  const std::int64_t rows = 3, stride = 70, vocab = 67;
  std::vector<float> logits(static_cast<std::size_t>(rows * stride), 1e9f);  // padding past vocab: never taken
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t v = 0; v < vocab; ++v) {
      // Few distinct values: many ties, negative and positive, and some -inf.
      const int level = static_cast<int>((v * 7 + r * 3) % 9) - 4;
      logits[static_cast<std::size_t>(r * stride + v)] = level == -4 ? -INFINITY : 0.5f * static_cast<float>(level);
    }
  }
  for (const std::int64_t k : {1, 2, 9, 30, 66}) {
    expect_top_k(logits, rows, stride, vocab, k, -1);
    if (k < vocab) expect_top_k(logits, rows, stride, vocab, k, 5);
  }
  // -0 and +0 are equal: the lower id first.
  std::vector<float> zeros{0.0f, -0.0f, -1.0f, 0.0f};
  std::vector<float> values(3);
  std::vector<std::int32_t> ids(3);
  decode_top_k(view(zeros, DType::f32), view(values, DType::f32), view(ids, DType::i32), 1, 4, 4, 3, -1, Stream{});
  EXPECT_EQ(ids, (std::vector<std::int32_t>{0, 1, 3}));
  EXPECT_THROW(
      decode_top_k(view(zeros, DType::f32), view(values, DType::f32), view(ids, DType::i32), 1, 4, 4, 5, -1, Stream{}),
      Error);
}

}  // namespace
}  // namespace adamant::kernels

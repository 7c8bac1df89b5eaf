// The decoding step's CUDA linear layer and top-k selection against the CPU kernels on the
// same bf16 values: every row count of the matrix-vector kernel and the GEMM beyond it, bf16
// and fp32 outputs, each epilogue; top-k exactly, ties and a masked id included.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "adamant/kernels/decode.h"
#include "cuda_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::bf16_values;
using testing::gpu;
using testing::MirroredArray;

Tensor host_view(std::vector<float>& v) { return Tensor::flat(v.data(), DType::f32, Device::cpu(), v.size()); }

void expect_linear_matches_cpu(std::int64_t rows, std::int64_t in_features, std::int64_t out_features,
                               const DecodeLinearArgs& args, bool fp32_out) {
  const std::size_t in_numel = static_cast<std::size_t>(rows * in_features),
                    out_numel = static_cast<std::size_t>(rows * out_features);
  MirroredArray<std::uint16_t> in(in_numel, DType::bf16), bias(static_cast<std::size_t>(out_features), DType::bf16),
      residual(out_numel, DType::bf16), weight(static_cast<std::size_t>(out_features * in_features), DType::bf16);
  for (std::size_t i = 0; i < in_numel; ++i) in.host[i] = f32_to_bf16(std::sin(0.37f * static_cast<float>(i)));
  for (std::size_t i = 0; i < weight.host.size(); ++i)
    weight.host[i] = f32_to_bf16(0.05f * std::cos(0.011f * static_cast<float>(i) + 0.2f));
  for (std::size_t i = 0; i < bias.host.size(); ++i) bias.host[i] = f32_to_bf16(0.01f * static_cast<float>(i % 13));
  for (std::size_t i = 0; i < out_numel; ++i)
    residual.host[i] = f32_to_bf16(1.0f - 0.003f * static_cast<float>(i % 701));
  in.upload();
  bias.upload();
  residual.upload();
  weight.upload();
  const bool with_bias = !fp32_out;
  const LinearShape shape{rows, in_features, out_features};

  std::vector<float> cpu_in = bf16_values(in.host), cpu_bias = bf16_values(bias.host),
                     cpu_residual = bf16_values(residual.host);
  std::vector<float> expected(out_numel);
  kernels::Workspace cpu_workspace(Stream(), testing::all_workspace_needs());
  decode_linear(host_view(cpu_in), weight.host_view(), with_bias ? host_view(cpu_bias) : Tensor{},
                host_view(cpu_residual), host_view(expected), shape, args, cpu_workspace, Stream{});

  const Stream stream(gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  std::vector<float> got(out_numel);
  if (fp32_out) {
    MirroredArray<float> out(out_numel, DType::f32);
    decode_linear(in.device_view(), weight.device_view(), Tensor{}, Tensor{}, out.device_view(), shape, args, workspace,
                  stream);
    stream.synchronize();
    got = out.download();
  } else {
    MirroredArray<std::uint16_t> out(out_numel, DType::bf16);
    decode_linear(in.device_view(), weight.device_view(), bias.device_view(), residual.device_view(), out.device_view(),
                  shape, args, workspace, stream);
    stream.synchronize();
    got = bf16_values(out.download());
  }
  // fp32 sums in another order, then (bf16 out) one rounding of 2^-8 relative. Where a GEMM takes
  // the rows, cuBLASLt may add split-K partial sums in bf16 and a separate epilogue kernel rounds
  // again: a few bf16 steps of the sums' scale (order one here).
  const bool composed = rows > kMaxDecodeGemvRows || in_features % 8 != 0;
  const double relative = fp32_out ? 1e-5 : composed ? 8e-3 : 4e-3;
  const double absolute = composed && !fp32_out ? 2e-3 : 1e-4;
  for (std::size_t i = 0; i < out_numel; ++i) {
    ASSERT_NEAR(got[i], expected[i], absolute + relative * std::fabs(expected[i]))
        << "rows " << rows << " in " << in_features << " out " << out_features << " element " << i;
  }
}

TEST(CudaDecodeLinear, MatchesTheCpuForEveryRowCountAndEpilogue) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<DecodeLinearArgs> epilogues{{DecodeEpilogue::none, GeluForm::exact},
                                                {DecodeEpilogue::gelu, GeluForm::exact},
                                                {DecodeEpilogue::gelu, GeluForm::tanh},
                                                {DecodeEpilogue::residual, GeluForm::exact}};
  for (const std::int64_t rows : {1, 2, 3, 5, 8, 13}) {  // 13: beyond the kernel's 8, a GEMM
    for (const DecodeLinearArgs& args : epilogues) expect_linear_matches_cpu(rows, 768, 2304, args, false);
    expect_linear_matches_cpu(rows, 256, 1003, {}, true);  // fp32 logits, an odd feature count
  }
  expect_linear_matches_cpu(1, 3072, 768, {DecodeEpilogue::residual, GeluForm::exact}, false);
  expect_linear_matches_cpu(2, 40, 24, {}, false);  // in_features not a multiple of 8: the GEMM
}

TEST(CudaDecodeTopK, EqualsTheCpuExactly) {
  ADAMANT_REQUIRE_GPU();
  const std::int64_t rows = 3, stride = 50304, vocab = 50257;
  MirroredArray<float> logits(static_cast<std::size_t>(rows * stride), DType::f32);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t v = 0; v < stride; ++v) {
      // Row 0 smooth and distinct, row 1 a few levels (thousands of ties), row 2 one large tie at the top.
      const double x = static_cast<double>(v);
      float value = static_cast<float>(5.0 * std::sin(0.001 * x * x + 0.3 * x));
      if (r == 1) value = std::round(value);
      if (r == 2) value = v % 97 == 0 ? 8.0f : value;
      logits.host[static_cast<std::size_t>(r * stride + v)] = v < vocab ? value : 1e9f;
    }
  }
  logits.upload();
  const Stream stream(gpu());
  for (const std::int64_t k : {1, 40, 256}) {
    for (const std::int32_t masked : {-1, 0, 194}) {
      const std::size_t pairs = static_cast<std::size_t>(rows * k);
      std::vector<float> cpu_values(pairs);
      std::vector<std::int32_t> cpu_ids(pairs);
      decode_top_k(logits.host_view(), host_view(cpu_values),
                   Tensor::flat(cpu_ids.data(), DType::i32, Device::cpu(), pairs), rows, stride, vocab, k, masked,
                   Stream{});
      MirroredArray<float> values(pairs, DType::f32);
      MirroredArray<std::int32_t> ids(pairs, DType::i32);
      decode_top_k(logits.device_view(), values.device_view(), ids.device_view(), rows, stride, vocab, k, masked,
                   stream);
      stream.synchronize();
      EXPECT_EQ(ids.download(), cpu_ids) << "k " << k << " masked " << masked;
      EXPECT_EQ(values.download(), cpu_values) << "k " << k << " masked " << masked;
    }
  }
}

}  // namespace
}  // namespace adamant::kernels

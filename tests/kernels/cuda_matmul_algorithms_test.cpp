// Recorded cuBLASLt algorithms on the GPU (kernels/matmul_algorithms.h): a workspace given
// a table runs the recorded algorithm (the same bits as running that algorithm directly,
// other bits than the heuristics' first answer), ignores other GPUs' choices, refuses a
// record cuBLASLt's words do not match, and tuning returns one valid choice per problem.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/core/stream.h"
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/cuda/workspace_resources.h"
#include "adamant/kernels/matmul_algorithms.h"
#include "support/gpu.h"

namespace adamant::kernels {
namespace {

using testing::gpu;

// A weight-gradient-like product: c[m, n] (fp32) += a[m, k] b[n, k]^T, bf16 operands with
// random values, so that different summation orders give different bits.
class GradientProduct {
 public:
  static constexpr std::int64_t kM = 384, kN = 256, kK = 8192;

  GradientProduct() : a_(kM * kK * 2, gpu()), b_(kN * kK * 2, gpu()), c_(kM * kN * 4, gpu()) {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<bf16_bits> a(kM * kK), b(kN * kK);
    for (auto& v : a) v = f32_to_bf16(normal(rng));
    for (auto& v : b) v = f32_to_bf16(normal(rng));
    copy_bytes(a_.data(), gpu(), a.data(), Device::cpu(), a_.bytes());
    copy_bytes(b_.data(), gpu(), b.data(), Device::cpu(), b_.bytes());
  }

  // c starts from 0.5 everywhere, then the product is added; returns c.
  std::vector<float> run(Workspace& workspace, const Stream& stream) {
    reset_output();
    cuda::MatmulProblem p;
    p.transpose_b = Transpose::yes;
    p.m = kM;
    p.n = kN;
    p.k = kK;
    p.beta = 1.0f;
    p.a = {a_.data(), DType::bf16, kK};
    p.b = {b_.data(), DType::bf16, kK};
    p.c = c_.data();
    p.c_dtype = DType::f32;
    p.c_row_stride = kN;
    cuda::matmul(p, workspace, stream);
    stream.synchronize();
    return output();
  }

  // The same product with `algorithm` run directly on cuBLASLt.
  std::vector<float> run_directly(cuda::CublasLtContext& context, const MatmulShape& shape,
                                  const cublasLtMatmulAlgo_t& algorithm) {
    reset_output();
    const cuda::MatmulDescriptors descriptors(shape);
    cuda::MatmulArguments arguments;
    arguments.beta = 1.0f;
    arguments.a = b_.data();  // column-major: the operands swap (cublaslt_matmul.h)
    arguments.b = a_.data();
    arguments.c = c_.data();
    const cuda::DeviceScratch scratch = context.scratch();
    cuda::check_cublas(descriptors.run(context.handle(), algorithm, arguments, scratch.data, scratch.bytes, nullptr),
                       "cublasLtMatmul");
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return output();
  }

 private:
  void reset_output() {
    const std::vector<float> start(kM * kN, 0.5f);
    copy_bytes(c_.data(), gpu(), start.data(), Device::cpu(), c_.bytes());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<float> output() const {
    std::vector<float> c(kM * kN);
    copy_bytes(c.data(), Device::cpu(), c_.data(), gpu(), c_.bytes());
    return c;
  }

  Buffer a_, b_, c_;
};

WorkspaceNeeds matmul_needs(std::shared_ptr<const MatmulAlgorithmTable> table) {
  WorkspaceNeeds needs;
  needs.matmul = true;
  needs.matmul_algorithms = std::move(table);
  return needs;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Largest |x - y| over the largest |y|.
double relative_difference(const std::vector<float>& x, const std::vector<float>& y) {
  double largest = 0, worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    largest = std::max(largest, static_cast<double>(std::abs(y[i])));
    worst = std::max(worst, static_cast<double>(std::abs(x[i] - y[i])));
  }
  return worst / largest;
}

MatmulAlgorithmRecord record_of(const MatmulTarget& target, const MatmulShape& shape,
                                const cublasLtMatmulAlgo_t& algorithm) {
  MatmulAlgorithmRecord record;
  record.target = target;
  record.shape = shape;
  std::memcpy(record.choice.algorithm.data(), algorithm.data, sizeof(algorithm.data));
  record.choice.config = cuda::algorithm_config(algorithm);
  return record;
}

class MatmulAlgorithmsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ADAMANT_REQUIRE_GPU();
    stream_ = std::make_unique<Stream>(gpu());
    plain_ = std::make_unique<Workspace>(*stream_, matmul_needs(nullptr));
    product_ = std::make_unique<GradientProduct>();
  }

  // The problem's shape and the heuristics' output, from a workspace without a table.
  void run_with_heuristics() {
    heuristic_output_ = product_->run(*plain_, *stream_);
    const auto problems = plain_->resources().matmul().problems();
    ASSERT_EQ(problems.size(), 1u);
    shape_ = problems.front().key;
    EXPECT_TRUE(problems.front().accumulates);
    target_ = matmul_target(*plain_);
  }

  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Workspace> plain_;  // without a table
  std::unique_ptr<GradientProduct> product_;
  std::vector<float> heuristic_output_;
  MatmulShape shape_;
  MatmulTarget target_;
};

TEST_F(MatmulAlgorithmsGpu, RecordedAlgorithmRunsInsteadOfTheFirstAnswer) {
  run_with_heuristics();
  cuda::CublasLtContext& context = plain_->resources().matmul();
  const cuda::MatmulDescriptors descriptors(shape_);
  const auto candidates = descriptors.candidates(context.handle(), context.scratch().bytes, 16);
  ASSERT_FALSE(candidates.empty());
  EXPECT_TRUE(same_bits(product_->run_directly(context, shape_, candidates[0]), heuristic_output_));
  // A candidate whose bits differ from the first answer's, so that the test sees which ran.
  std::size_t other = 0;
  std::vector<float> other_output;
  for (std::size_t i = 1; i < candidates.size() && other == 0; ++i) {
    other_output = product_->run_directly(context, shape_, candidates[i]);
    if (!same_bits(other_output, heuristic_output_)) other = i;
  }
  if (other == 0) GTEST_SKIP() << "every candidate gives the first answer's bits on this GPU";

  auto table = std::make_shared<MatmulAlgorithmTable>();
  table->set(record_of(target_, shape_, candidates[other]));
  Workspace recorded(*stream_, matmul_needs(table));
  const std::vector<float> output = product_->run(recorded, *stream_);
  EXPECT_EQ(recorded.resources().matmul().recorded_plans(), 1u);
  EXPECT_TRUE(same_bits(output, other_output));
  EXPECT_FALSE(same_bits(output, heuristic_output_));
  EXPECT_LT(relative_difference(output, heuristic_output_), 1e-4);    // only the summation order differs
  EXPECT_TRUE(same_bits(product_->run(recorded, *stream_), output));  // and again the same bits
}

TEST_F(MatmulAlgorithmsGpu, OtherGpusChoicesAreIgnored) {
  run_with_heuristics();
  cuda::CublasLtContext& context = plain_->resources().matmul();
  const auto candidates = cuda::MatmulDescriptors(shape_).candidates(context.handle(), context.scratch().bytes, 16);
  ASSERT_FALSE(candidates.empty());
  MatmulTarget other_gpu = target_;
  other_gpu.gpu += "_other";
  MatmulTarget other_library = target_;
  other_library.cublaslt_version += 1;
  auto table = std::make_shared<MatmulAlgorithmTable>();
  table->set(record_of(other_gpu, shape_, candidates.back()));
  table->set(record_of(other_library, shape_, candidates.back()));
  Workspace workspace(*stream_, matmul_needs(table));
  EXPECT_TRUE(same_bits(product_->run(workspace, *stream_), heuristic_output_));
  EXPECT_EQ(workspace.resources().matmul().recorded_plans(), 0u);
}

TEST_F(MatmulAlgorithmsGpu, RecordThatDoesNotDescribeItsWordsIsRefused) {
  run_with_heuristics();
  cuda::CublasLtContext& context = plain_->resources().matmul();
  const auto candidates = cuda::MatmulDescriptors(shape_).candidates(context.handle(), context.scratch().bytes, 1);
  ASSERT_FALSE(candidates.empty());
  MatmulAlgorithmRecord record = record_of(target_, shape_, candidates[0]);
  record.choice.config.stages += 1;  // an edited line
  auto table = std::make_shared<MatmulAlgorithmTable>(MatmulAlgorithmTable::parse("", "edited.tsv"));
  table->set(record);
  Workspace workspace(*stream_, matmul_needs(table));
  try {
    product_->run(workspace, *stream_);
    FAIL() << "a record that does not match its algorithm ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul algorithms file edited.tsv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("adamant tune-matmul"), std::string::npos) << e.what();
  }
}

TEST_F(MatmulAlgorithmsGpu, TuningGivesOneValidChoicePerProblem) {
  run_with_heuristics();
  const MatmulTuningOptions options{.candidates = 6, .repetitions = 3, .min_gain = 0.02};
  const std::vector<MatmulAlgorithmRecord> records = tune_matmul_algorithms(*plain_, options);
  ASSERT_EQ(records.size(), 1u);
  const MatmulAlgorithmRecord& r = records.front();
  EXPECT_EQ(r.target, target_);
  EXPECT_EQ(r.shape, shape_);
  cublasLtMatmulAlgo_t algorithm{};
  std::memcpy(algorithm.data, r.choice.algorithm.data(), sizeof(algorithm.data));
  EXPECT_EQ(cuda::algorithm_config(algorithm), r.choice.config);
  // Either the first answer, or one at least min_gain faster by the times it reports.
  cuda::CublasLtContext& context = plain_->resources().matmul();
  const auto first = cuda::MatmulDescriptors(shape_).candidates(context.handle(), context.scratch().bytes, 1);
  const bool is_first = std::memcmp(first.front().data, algorithm.data, sizeof(algorithm.data)) == 0;
  EXPECT_TRUE(is_first || r.choice.chosen_us <= (1.0 - options.min_gain) * r.choice.heuristic_us)
      << r.choice.chosen_us << " us against " << r.choice.heuristic_us << " us";
  if (is_first) {
    EXPECT_EQ(r.choice.chosen_us, r.choice.heuristic_us);
  }

  // The recorded choice reproduces its bits run after run, close to the first answer's.
  auto table = std::make_shared<MatmulAlgorithmTable>();
  table->set(r);
  Workspace workspace(*stream_, matmul_needs(table));
  const std::vector<float> output = product_->run(workspace, *stream_);
  EXPECT_TRUE(same_bits(product_->run(workspace, *stream_), output));
  EXPECT_LT(relative_difference(output, heuristic_output_), 1e-4);
}

}  // namespace
}  // namespace adamant::kernels

// The gradient core shared by both optimizers: the update ranges' segment tables and
// checkpoint pieces against a plan worked out by hand, the order in which the grad-ready
// hook starts bucket syncs, and the grad norm and step factor against a direct sum.
#include "adamant/optim/bucketed_grads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "adamant/comm/single_process_communicator.h"
#include "adamant/core/buffer.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "synthetic_model.h"

namespace adamant::optim {
namespace {

// a: 100 weights (decay), b: 50 (no decay, replicated over tensor-parallel ranks), c: 200 (decay).
ParamList three_params() {
  ParamList params = testing::make_param_list({{"a", 100, true}, {"b", 50, false}, {"c", 200, true}});
  params.params[1].tp_duplicate = true;
  return params;
}

using Triples = std::vector<std::int64_t>;

void expect_pieces(const std::vector<StatePiece>& actual, const std::vector<StatePiece>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].param, expected[i].param) << "piece " << i;
    EXPECT_EQ(actual[i].param_offset, expected[i].param_offset) << "piece " << i;
    EXPECT_EQ(actual[i].state_offset, expected[i].state_offset) << "piece " << i;
    EXPECT_EQ(actual[i].numel, expected[i].numel) << "piece " << i;
  }
}

// Tensor-parallel rank 1 of 2, for GradNormScope::counts only: any collective is a test failure.
class SecondTensorParallelRank final : public comm::Communicator {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  Device device() const override { return Device::cpu(); }
  const char* backend_name() const override { return "tensor-parallel rank 1 of 2 (no collectives)"; }
  comm::CommHandle all_reduce_async(Tensor, comm::ReduceOp) override { throw std::logic_error("all_reduce"); }
  comm::CommHandle reduce_scatter_async(Tensor, Tensor, comm::ReduceOp) override {
    throw std::logic_error("reduce_scatter");
  }
  comm::CommHandle all_gather_async(Tensor, Tensor) override { throw std::logic_error("all_gather"); }
  comm::CommHandle broadcast_async(Tensor, int) override { throw std::logic_error("broadcast"); }
  comm::CommHandle send_async(Tensor, int) override { throw std::logic_error("send"); }
  comm::CommHandle recv_async(Tensor, int) override { throw std::logic_error("recv"); }
  void barrier() override { throw std::logic_error("barrier"); }
};

// Capacity 128 with 2 shards: buckets [0, 128), [128, 256), [256, 384) of 2 x 64; a = [0, 100),
// b = [100, 150), c = [150, 350).
TEST(UpdateRanges, RankShardsMatchAPlanWorkedOutByHand) {
  const ParamList params = three_params();
  const BucketPlan plan(params, 128, 2);
  ASSERT_EQ(plan.buckets().size(), 3u);

  const UpdateRanges rank0 = UpdateRanges::rank_shards(plan, params, 0, {});
  ASSERT_EQ(rank0.size(), 3u);
  EXPECT_EQ(rank0.state_numel(), 192u);
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(rank0[r].flat_offset, 128 * r);  // shard 0 of bucket r
    EXPECT_EQ(rank0[r].state_offset, 64 * r);
    EXPECT_EQ(rank0[r].numel, 64u);
  }
  // [0, 64): a[0, 64) | [128, 192): b[28, 50), c[0, 42) | [256, 320): c[106, 170)
  EXPECT_EQ(rank0.segments(), (Triples{0, 64, 1, 0, 22, 0, 22, 64, 1, 0, 64, 1}));
  EXPECT_EQ(rank0.norm_segments(), (Triples{0, 64, 0, 0, 22, 0, 22, 64, 0, 0, 64, 0}));
  EXPECT_EQ(rank0[1].segment_begin, 3u);
  EXPECT_EQ(rank0[1].segment_count, 6u);
  EXPECT_EQ(rank0[2].segment_begin, 9u);
  expect_pieces(rank0.state_pieces(), {{0, 0, 0, 64}, {1, 28, 64, 22}, {2, 0, 86, 42}, {2, 106, 128, 64}});

  // [64, 128): a[64, 100), b[0, 28) | [192, 256): c[42, 106) | [320, 384): c[170, 200), then padding
  const UpdateRanges rank1 = UpdateRanges::rank_shards(plan, params, 1, {});
  EXPECT_EQ(rank1[0].flat_offset, 64u);
  EXPECT_EQ(rank1[1].flat_offset, 192u);
  EXPECT_EQ(rank1[2].flat_offset, 320u);
  EXPECT_EQ(rank1.segments(), (Triples{0, 36, 1, 36, 64, 0, 0, 64, 1, 0, 30, 1}));
  expect_pieces(rank1.state_pieces(), {{0, 64, 0, 36}, {1, 0, 36, 28}, {2, 42, 64, 64}, {2, 170, 128, 30}});

  // On tensor-parallel rank 1 the replicated b counts in Adam but not in the norm.
  SecondTensorParallelRank tensor_parallel;
  const UpdateRanges scoped = UpdateRanges::rank_shards(plan, params, 1, GradNormScope{&tensor_parallel});
  EXPECT_EQ(scoped.segments(), rank1.segments());
  EXPECT_EQ(scoped.norm_segments(), (Triples{0, 36, 0, 0, 64, 0, 0, 30, 0}));
  EXPECT_EQ(scoped[0].norm_segment_count, 3u);
  EXPECT_EQ(scoped[1].norm_segment_begin, 3u);
}

// a = [0, 300), b = [300, 350), the weight the forward reads first; buckets [0, 128), [128, 256), [256, 384).
TEST(UpdateRanges, OnlyTheRangesHoldingTheWeightReadFirstUpdateOnEverySm) {
  const ParamList params = testing::make_param_list({{"a", 300, true}, {"b", 50, false}});
  const BucketPlan plan(params, 128, 1);
  const UpdateRanges shards = UpdateRanges::rank_shards(plan, params, 0, {});
  EXPECT_EQ(shards.sms_beside_forward(params, 16), (std::vector<int>{16, 16, 0}));
  EXPECT_EQ(shards.sms_beside_forward(params, 0), (std::vector<int>{0, 0, 0}));
  // c = [150, 350) of three_params spans the last two buckets; on rank 1 of 2 its shards are [192, 256), [320, 384).
  const ParamList three = three_params();
  const BucketPlan halves(three, 128, 2);
  EXPECT_EQ(UpdateRanges::rank_shards(halves, three, 1, {}).sms_beside_forward(three, 24),
            (std::vector<int>{24, 0, 0}));
  EXPECT_EQ(UpdateRanges::whole_model(three, 384, {}).sms_beside_forward(three, 24), (std::vector<int>{0}));
}

TEST(UpdateRanges, WholeModelIsOneRangeOfFlatOffsets) {
  const ParamList params = three_params();
  SecondTensorParallelRank tensor_parallel;
  const UpdateRanges whole = UpdateRanges::whole_model(params, 384, GradNormScope{&tensor_parallel});
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].flat_offset, 0u);
  EXPECT_EQ(whole[0].state_offset, 0u);
  EXPECT_EQ(whole[0].numel, 384u);
  EXPECT_EQ(whole.state_numel(), 384u);
  EXPECT_EQ(whole.segments(), (Triples{0, 100, 1, 100, 150, 0, 150, 350, 1}));
  EXPECT_EQ(whole.norm_segments(), (Triples{0, 100, 0, 150, 350, 0}));
  expect_pieces(whole.state_pieces(), {{0, 0, 0, 100}, {1, 0, 100, 50}, {2, 0, 150, 200}});
}

// Records which bucket each started sync is, and the tensor it was handed.
class RecordingSync final : public GradSync {
 public:
  comm::CommHandle start_bucket_sync(Tensor bucket_grads, const Bucket& bucket) override {
    started.push_back(bucket.offset / 128);
    sent.push_back(bucket_grads);
    return {};  // one rank: the bucket is its own sum
  }
  std::vector<std::size_t> started;
  std::vector<Tensor> sent;
};

constexpr double kMiBOf128Floats = 128.0 * 4 / (1024 * 1024);

struct Core {
  explicit Core(GradLayout layout, bool overlap = true, DType sync_dtype = DType::f32, double clip = 0) {
    options.bucket_cap_mb = kMiBOf128Floats;  // one shard: buckets [0, 128), [128, 256), [256, 384)
    options.overlap_grad_sync = overlap;
    options.grad_sync_dtype = sync_dtype;
    options.gradient_clip_val = clip;
    grads_core = std::make_unique<BucketedGrads>(options, params, layout, comm, stream, GradNormScope{}, sync);
    grad_buffer = Buffer(grads_core->plan().padded_numel() * sizeof(float), Device::cpu());
    grads = Tensor::of(grad_buffer, DType::f32);
    grads_core->attach(grads);
  }
  OptimizerOptions options;
  ParamList params = three_params();
  comm::SingleProcessCommunicator comm;
  Stream stream;
  RecordingSync sync;
  std::unique_ptr<BucketedGrads> grads_core;
  Buffer grad_buffer;
  Tensor grads;
};

// Fragments: bucket 0 holds a and b[0, 28); bucket 1 b[28, 50) and c[0, 106); bucket 2 c[106, 200).
TEST(BucketedGrads, StartsEachBucketWhenItsLastGradientIsFinal) {
  Core core(GradLayout::sharded);
  ASSERT_EQ(core.grads_core->plan().buckets().size(), 3u);
  core.grads_core->on_grad_ready(0);  // a: bucket 0 still waits for b
  EXPECT_TRUE(core.sync.started.empty());
  core.grads_core->on_grad_ready(1);  // b completes bucket 0
  EXPECT_EQ(core.sync.started, (std::vector<std::size_t>{0}));
  core.grads_core->on_grad_ready(2);  // c completes buckets 1 and 2, in bucket order
  EXPECT_EQ(core.sync.started, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_THROW(core.grads_core->on_grad_ready(2), Error);  // twice in one step
  core.grads_core->finish_sync(1.0);
  EXPECT_EQ(core.sync.started.size(), 3u);  // nothing started twice
  for (std::size_t b = 0; b < 3; ++b) {
    EXPECT_EQ(core.sync.sent[b].data, core.grads.slice(128 * b, 128).data) << "bucket " << b;
    EXPECT_EQ(core.sync.sent[b].numel(), 128u);
    EXPECT_EQ(core.sync.sent[b].dtype, DType::f32);
  }

  // The next step starts afresh; another order of readiness starts other buckets first.
  core.grads_core->reset_readiness();
  core.sync.started.clear();
  core.grads_core->on_grad_ready(2);  // c alone fills bucket 2
  EXPECT_EQ(core.sync.started, (std::vector<std::size_t>{2}));
  core.grads_core->on_grad_ready(0);
  EXPECT_EQ(core.sync.started, (std::vector<std::size_t>{2}));
  core.grads_core->finish_sync(1.0);  // b never reported: buckets 0 and 1 start here, in order
  EXPECT_EQ(core.sync.started, (std::vector<std::size_t>{2, 0, 1}));
}

TEST(BucketedGrads, WithoutOverlapEveryBucketStartsInStepInBucketOrder) {
  Core core(GradLayout::sharded, /*overlap=*/false);
  for (std::size_t p : {2, 1, 0}) core.grads_core->on_grad_ready(p);
  EXPECT_TRUE(core.sync.started.empty());
  core.grads_core->finish_sync(1.0);
  EXPECT_EQ(core.sync.started, (std::vector<std::size_t>{0, 1, 2}));
}

TEST(BucketedGrads, OneReplicatedRankHasNothingToSync) {
  Core core(GradLayout::replicated);
  for (std::size_t p = 0; p < 3; ++p) core.grads_core->on_grad_ready(p);
  core.grads_core->finish_sync(1.0);
  EXPECT_TRUE(core.sync.started.empty());
  EXPECT_EQ(core.grads_core->synced_grad(0).data, core.grads.data);
  EXPECT_EQ(core.grads_core->synced_grad(0).numel(), 384u);
}

// g = (index mod 7) - 3 on the weights, 1000 on the padding (which no segment covers).
std::vector<float> fill_gradients(Core& core) {
  float* g = core.grads.ptr<float>();
  std::vector<float> weights_only(core.params.total_numel);
  for (std::size_t i = 0; i < core.grads.numel(); ++i) {
    g[i] = i < weights_only.size() ? static_cast<float>(static_cast<int>(i % 7) - 3) : 1000.0f;
    if (i < weights_only.size()) weights_only[i] = g[i];
  }
  return weights_only;
}

TEST(BucketedGrads, NormAndStepFactorMatchADirectSum) {
  for (GradLayout layout : {GradLayout::replicated, GradLayout::sharded}) {
    for (DType sync_dtype : {DType::f32, DType::bf16}) {
      if (layout == GradLayout::replicated && sync_dtype == DType::bf16) continue;  // replicated syncs fp32
      SCOPED_TRACE(::testing::Message() << "sharded " << (layout == GradLayout::sharded) << " sync "
                                        << dtype_name(sync_dtype));
      Core core(layout, true, sync_dtype, /*clip=*/1.0);
      const std::vector<float> g = fill_gradients(core);
      double sum = 0;
      for (float x : g) sum += static_cast<double>(x) * x;
      const double grad_scale = 0.25;
      const StepScale scale = core.grads_core->finish_sync(grad_scale);
      const double norm = std::sqrt(sum) * grad_scale;
      EXPECT_NEAR(scale.grad_norm, norm, 1e-12 * norm);
      EXPECT_TRUE(scale.finite);
      EXPECT_FLOAT_EQ(scale.adam_grad_scale, static_cast<float>(grad_scale * 1.0 / (norm + 1e-6)));
      // The ranges read the synced gradient: on this one rank, which sends nothing, the fp32 buffer
      // itself, bf16 sync or not (a bf16 copy is made only to be sent; optim_mpi_tests cover it).
      const Tensor synced = core.grads_core->synced_grad(0);
      EXPECT_EQ(synced.dtype, DType::f32);
      EXPECT_EQ(synced.data, core.grads.data);
      // The next step's readiness starts afresh; the gradients stay for the model to write over.
      core.grads_core->reset_readiness();
      for (std::size_t i = 0; i < g.size(); ++i) ASSERT_EQ(core.grads.ptr<float>()[i], g[i]) << i;
    }
  }
}

TEST(BucketedGrads, NonFiniteGradientSkipsTheStep) {
  Core core(GradLayout::sharded);
  fill_gradients(core);
  core.grads.ptr<float>()[260] = std::numeric_limits<float>::infinity();  // in c, bucket 2
  const StepScale scale = core.grads_core->finish_sync(1.0);
  EXPECT_FALSE(scale.finite);
  EXPECT_FALSE(std::isfinite(scale.grad_norm));
}

}  // namespace
}  // namespace adamant::optim

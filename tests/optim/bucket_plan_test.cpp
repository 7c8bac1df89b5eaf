// BucketPlan (and BucketReadiness) against a brute-force per-element reference: every flat element is
// mapped to (bucket, shard, parameter, offset) by direct arithmetic and compared
// with the plan's fragments, for many parameter lists, capacities and shard counts.
#include "adamant/optim/bucket_plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "adamant/optim/bucket_readiness.h"
#include "synthetic_model.h"

namespace adamant::optim {
namespace {

struct Owner {
  std::size_t param = SIZE_MAX;  // SIZE_MAX: padding
  std::size_t offset = 0;
};

// Which parameter element sits at each flat position (a linear scan, independent of the plan).
std::vector<Owner> owners(const ParamList& params, std::size_t padded) {
  std::vector<Owner> out(padded);
  for (std::size_t p = 0; p < params.size(); ++p) {
    for (std::size_t j = 0; j < params[p].numel; ++j) out[params[p].offset + j] = {p, j};
  }
  return out;
}

void check_plan(const ParamList& params, std::size_t capacity_elements, int shards) {
  SCOPED_TRACE(::testing::Message() << "capacity " << capacity_elements << " shards " << shards << " params "
                                    << params.size() << " total " << params.total_numel);
  const BucketPlan plan(params, capacity_elements, shards);
  const std::size_t granule = 64 * static_cast<std::size_t>(shards);
  const std::size_t capacity = (capacity_elements + granule - 1) / granule * granule;
  ASSERT_EQ(plan.capacity(), capacity);
  const std::size_t total = params.total_numel;
  const std::size_t expected_buckets = (total + capacity - 1) / capacity;
  ASSERT_EQ(plan.buckets().size(), expected_buckets);
  const std::size_t last_weights = total - (expected_buckets - 1) * capacity;
  const std::size_t expected_padded =
      (expected_buckets - 1) * capacity + (last_weights + granule - 1) / granule * granule;
  ASSERT_EQ(plan.padded_numel(), expected_padded);
  ASSERT_LT(plan.padded_numel() - total, granule);

  const auto owner = owners(params, plan.padded_numel());
  std::vector<int> seen(plan.padded_numel(), 0);
  std::size_t shard_total = 0;
  for (std::size_t b = 0; b < plan.buckets().size(); ++b) {
    const Bucket& bucket = plan.buckets()[b];
    ASSERT_EQ(bucket.offset, b * capacity);  // every bucket but the last is filled exactly
    ASSERT_EQ(bucket.numel, b + 1 < expected_buckets ? capacity : plan.padded_numel() - bucket.offset);
    ASSERT_EQ(bucket.shard_numel * static_cast<std::size_t>(shards), bucket.numel);
    ASSERT_EQ(bucket.shard_numel % 64, 0u);
    ASSERT_EQ(plan.shard_state_offset(b), shard_total);
    shard_total += bucket.shard_numel;
    for (const Fragment& f : bucket.fragments) {
      ASSERT_GT(f.numel, 0u);
      ASSERT_EQ(f.first_shard, static_cast<int>(f.bucket_offset / bucket.shard_numel));
      ASSERT_EQ(f.last_shard, static_cast<int>((f.bucket_offset + f.numel - 1) / bucket.shard_numel));
      ASSERT_GE(b, plan.first_bucket(f.param));
      ASSERT_LE(b, plan.last_bucket(f.param));
      for (std::size_t k = 0; k < f.numel; ++k) {
        const std::size_t flat = bucket.offset + f.bucket_offset + k;
        ASSERT_EQ(owner[flat].param, f.param) << flat;
        ASSERT_EQ(owner[flat].offset, f.param_offset + k) << flat;
        ++seen[flat];
      }
    }
    // The shards' pieces are the fragments cut at shard borders.
    std::size_t piece_elements = 0;
    for (int s = 0; s < shards; ++s) {
      for (const ShardFragment& piece : plan.shard_fragments(b, s)) {
        ASSERT_LE(piece.shard_offset + piece.numel, bucket.shard_numel);
        for (std::size_t k = 0; k < piece.numel; ++k) {
          const std::size_t flat =
              bucket.offset + static_cast<std::size_t>(s) * bucket.shard_numel + piece.shard_offset + k;
          ASSERT_EQ(owner[flat].param, piece.param);
          ASSERT_EQ(owner[flat].offset, piece.param_offset + k);
        }
        piece_elements += piece.numel;
      }
    }
    std::size_t fragment_elements = 0;
    for (const Fragment& f : bucket.fragments) fragment_elements += f.numel;
    ASSERT_EQ(piece_elements, fragment_elements);
  }
  ASSERT_EQ(plan.shard_numel_total(), shard_total);
  ASSERT_EQ(shard_total * static_cast<std::size_t>(shards), plan.padded_numel());
  // Every weight in exactly one fragment, padding in none.
  for (std::size_t i = 0; i < plan.padded_numel(); ++i) {
    ASSERT_EQ(seen[i], owner[i].param == SIZE_MAX ? 0 : 1) << i;
  }
}

TEST(BucketPlan, MatchesPerElementReferenceForManyLayouts) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 60; ++trial) {
    std::uniform_int_distribution<int> count(1, 12);
    std::uniform_int_distribution<std::size_t> size(1, 900);
    std::vector<std::string> names;
    std::vector<optim::testing::SizedParam> sizes;
    const int n = count(rng);
    names.reserve(n);
    for (int i = 0; i < n; ++i) names.push_back(fmt::format("p{}", i));
    for (int i = 0; i < n; ++i) sizes.push_back({names[i].c_str(), size(rng), i % 2 == 0});
    const ParamList params = optim::testing::make_param_list(sizes);
    for (int shards : {1, 2, 3, 4, 5, 7}) {
      for (std::size_t capacity : {1, 64, 100, 500, 2000}) check_plan(params, capacity, shards);
    }
  }
}

TEST(BucketPlan, ParameterLargerThanABucketSpansBuckets) {
  const ParamList params = optim::testing::synthetic_params();
  const BucketPlan plan(params, 524, 3);  // capacity 576 < 1500 weights of fc1
  check_plan(params, 524, 3);
  const std::size_t fc1 = params.index_of("decoder.mlp.fc1.weight");
  EXPECT_GE(plan.last_bucket(fc1) - plan.first_bucket(fc1), 2u);
  EXPECT_EQ(plan.last_bucket(params.size() - 1), plan.buckets().size() - 1);  // the embedding ends the layout
}

TEST(BucketPlan, LastBucketWithFewerWeightsThanRanksHasPurePaddingShards) {
  // 2 * 256 + 2 weights with 4 shards and capacity 256: the last bucket holds 2 weights in 4 shards of 64.
  const ParamList params = optim::testing::make_param_list({{"a", 300, true}, {"b", 214, false}});
  const BucketPlan plan(params, 256, 4);
  check_plan(params, 256, 4);
  ASSERT_EQ(plan.buckets().size(), 3u);
  const Bucket& last = plan.buckets().back();
  EXPECT_EQ(last.numel, 256u);
  ASSERT_EQ(last.fragments.size(), 1u);
  EXPECT_EQ(last.fragments[0].numel, 2u);
  EXPECT_EQ(plan.shard_fragments(2, 0).size(), 1u);
  for (int s = 1; s < 4; ++s) EXPECT_TRUE(plan.shard_fragments(2, s).empty()) << s;
}

TEST(BucketPlan, CapacityFromMegabytesAndBadInput) {
  EXPECT_EQ(BucketPlan::capacity_for(100, 4), 100u * 1024 * 1024 / 4);
  EXPECT_EQ(BucketPlan::capacity_for(1, 2), 1024u * 1024 / 2);
  try {
    BucketPlan::capacity_for(0, 4);
    FAIL() << "bucket_cap_mb=0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.optim.bucket_cap_mb"), std::string::npos) << e.what();
  }
  ParamList overlapping = optim::testing::make_param_list({{"a", 10, true}, {"b", 10, true}});
  overlapping.params[1].offset = 5;
  EXPECT_THROW(BucketPlan(overlapping, 64, 1), Error);
}

}  // namespace
}  // namespace adamant::optim

namespace adamant::optim {
namespace {

TEST(BucketReadiness, BucketCompletesExactlyWhenAllItsParametersAreFinal) {
  const ParamList params = optim::testing::synthetic_params();
  for (int shards : {1, 3}) {
    const BucketPlan plan(params, 300, shards);
    BucketReadiness readiness(plan, params);
    for (int round = 0; round < 2; ++round) {  // reset() makes the next step start afresh
      std::vector<bool> final_param(params.size(), false);
      for (std::size_t p = 0; p < params.size(); ++p) {
        readiness.mark_ready(p);
        final_param[p] = true;
        for (std::size_t b = 0; b < plan.buckets().size(); ++b) {
          bool all_final = true;
          for (const Fragment& f : plan.buckets()[b].fragments) all_final = all_final && final_param[f.param];
          ASSERT_EQ(readiness.complete(b), all_final) << "bucket " << b << " after param " << p;
        }
      }
      EXPECT_THROW(readiness.mark_ready(0), Error);  // twice in one step
      readiness.reset();
    }
  }
}

}  // namespace
}  // namespace adamant::optim

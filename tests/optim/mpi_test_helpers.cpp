#include "mpi_test_helpers.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <bit>
#include <cstring>

#include "support/test_data.h"

namespace adamant::optim::testing {

Trained::Trained(const OptimizerOptions& options, const ParamList& params, comm::Communicator* communicator,
                 DType grad_dtype)
    : stream(std::make_unique<Stream>()) {
  if (communicator == nullptr) {
    local_comm = std::make_unique<comm::SingleProcessCommunicator>();
    communicator = local_comm.get();
  }
  comm = communicator;
  optimizer = make_optimizer(options, params, *comm, *stream);
  model = std::make_unique<SyntheticModel>(params, options.model_dtype, optimizer->padded_numel(), grad_dtype);
  model->init_weights();
  optimizer->attach(model->weights(), model->grads());
}

void Trained::run(const RunConfig& config) {
  const auto more = run_steps(*optimizer, *model, comm->rank(), comm->size(), config);
  results.insert(results.end(), more.begin(), more.end());
}

std::filesystem::path Trained::save(const std::filesystem::path& dir) const {
  optimizer->save(dir);
  return dir;
}

OptimizerOptions test_options(const char* name, DType dtype) {
  OptimizerOptions o;
  o.name = name;
  o.model_dtype = dtype;
  o.megatron_amp_O2 = true;
  o.gradient_clip_val = 0.0;
  o.bucket_cap_mb = 0.002;  // 524 fp32 gradients: 5 to 6 buckets on the 3129-weight test model
  o.weight_decay = 0.1;
  o.beta2 = 0.95;
  return o;
}

void remove_shared_dir(const std::filesystem::path& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove_all(dir);
}

double max_abs_difference(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= worst)) worst = d;  // NaN propagates
  }
  return worst;
}

void expect_bitwise_equal(std::span<const float> a, std::span<const float> b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) {
      ADD_FAILURE() << what << " differ first at element " << i << ": " << a[i] << " vs " << b[i]
                    << " (max abs difference " << max_abs_difference(a, b) << ")";
      return;
    }
  }
}

void expect_bitwise_equal(std::span<const std::uint16_t> a, std::span<const std::uint16_t> b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      ADD_FAILURE() << what << " differ first at element " << i << ": " << a[i] << " vs " << b[i];
      return;
    }
  }
}

}  // namespace adamant::optim::testing

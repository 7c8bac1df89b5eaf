#pragma once
// Shared pieces of the MPI optimizer tests: a trained optimizer with its model
// (and the stream and communicator it references), a folder every rank sees, and
// comparisons of weights and checkpointed state.
#include <cmath>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/comm/single_process_communicator.h"
#include "adamant/optim/optimizer.h"
#include "support/mpi_world.h"
#include "support/test_data.h"
#include "synthetic_model.h"

namespace adamant::optim::testing {

// An optimizer, its model and what it references. With comm == nullptr it runs on
// a private single-process communicator (the one-rank reference).
struct Trained {
  // `grad_dtype`: the model's gradient buffer, fp32 or bf16 (SyntheticModel).
  Trained(const OptimizerOptions& options, const ParamList& params, comm::Communicator* comm,
          DType grad_dtype = DType::f32);
  void run(const RunConfig& config);  // appends to results
  std::filesystem::path save(const std::filesystem::path& dir) const;

  std::unique_ptr<Stream> stream;
  std::unique_ptr<comm::SingleProcessCommunicator> local_comm;
  comm::Communicator* comm = nullptr;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<SyntheticModel> model;
  std::vector<StepResult> results;
};

// The default options of these tests: small buckets so the test model spans several.
OptimizerOptions test_options(const char* name, DType dtype = DType::bf16);

using adamant::testing::shared_temp_dir;
using adamant::testing::world_rank;

// Barrier on MPI_COMM_WORLD, then rank 0 removes the folder (before the end of the test).
void remove_shared_dir(const std::filesystem::path& dir);

double max_abs_difference(std::span<const float> a, std::span<const float> b);
// Fails (naming `what` and the first differing index) unless every value has the same bits.
void expect_bitwise_equal(std::span<const float> a, std::span<const float> b, const std::string& what);
void expect_bitwise_equal(std::span<const std::uint16_t> a, std::span<const std::uint16_t> b, const std::string& what);

}  // namespace adamant::optim::testing

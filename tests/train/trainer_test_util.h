#pragma once
// Shared set-up of the trainer tests: a small random-token dataset on disk, a
// tiny GPT config, and helpers to run training on a subset of the MPI ranks.
#include <mpi.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "adamant/train/train_config.h"
#include "adamant/train/trainer.h"
#include "support/mpi_world.h"
#include "support/test_data.h"

namespace adamant::testing {

// Writes <dir>/tokens_text_document.{bin,idx}: `documents` documents of random
// lengths with random ids below `max_id` (rank 0 only; all ranks wait). Returns the prefix.
std::filesystem::path write_random_dataset(const std::filesystem::path& dir, int documents, int max_id);

// A tiny GPT trained on `prefix`, writing under `run_dir`; the caller adjusts the rest.
train::TrainConfig tiny_config(const std::filesystem::path& prefix, const std::filesystem::path& run_dir);

// Runs training on world ranks [0, ranks) (the others wait) and returns the summary on
// those ranks (an empty summary elsewhere).
train::TrainSummary train_on_ranks(const train::TrainConfig& config, int ranks, train::TrainOptions options = {});

// Runs `run` and expects an adamant::Error whose message contains `text`.
void expect_error_containing(const std::function<void()>& run, const std::string& text);

// Largest |a - b| / max(|b|, 1e-30) over the two sequences (they must have the same length).
double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace adamant::testing

#pragma once
// Train/valid/test split of a dataset's documents by `splits_string`, with
// Megatron's semantics: weights such as "969,30,1" (or "98/2/0", or "1") are
// normalised, each split gets round(weight * documents) consecutive documents,
// and the rounding error is taken from the first split.
#include <array>
#include <cstddef>
#include <string_view>

#include "adamant/core/option_checks.h"

namespace adamant::data {

enum class Split { train = 0, valid = 1, test = 2 };

struct DocumentRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
  bool empty() const { return end == begin; }
};

// The train, validation and test weights of splits_string (missing ones are 0). Throws
// adamant::Error naming model.data.splits_string for an unparsable or all-zero string or more
// than three weights; `origin` says where the value came from.
std::array<double, 3> split_weights(std::string_view splits_string, const KeyOrigin& origin = {});

// The documents of each split (split_weights' errors for a bad string).
std::array<DocumentRange, 3> split_documents(std::string_view splits_string, std::size_t num_documents);

}  // namespace adamant::data

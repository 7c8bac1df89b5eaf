#include "adamant/data/dataset_split.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <optional>
#include <string>

#include "adamant/core/error.h"
#include "adamant/core/number_text.h"

namespace adamant::data {
std::array<double, 3> split_weights(std::string_view splits_string, const KeyOrigin& origin) {
  const OptionChecks check(origin);
  const char separator = splits_string.find(',') != std::string_view::npos ? ',' : '/';
  std::array<double, 3> weights{0.0, 0.0, 0.0};
  std::size_t start = 0;
  for (std::size_t count = 0;; ++count) {
    const std::size_t stop = splits_string.find(separator, start);
    std::string field(splits_string.substr(start, stop == std::string_view::npos ? stop : stop - start));
    const auto first = field.find_first_not_of(" \t");
    const auto last = field.find_last_not_of(" \t");
    field = first == std::string::npos ? "" : field.substr(first, last - first + 1);
    const std::optional<double> weight = number_from_text<double>(field);
    if (count == weights.size() || !weight || *weight < 0.0) {
      fail(
          "model.data.splits_string: '{}' is not a train,validation,test split{}; write up to three non-negative "
          "weights such as \"969,30,1\" (or \"98/2/0\")",
          splits_string, check.where("model.data.splits_string"));
    }
    weights[count] = *weight;
    if (stop == std::string_view::npos) break;
    start = stop + 1;
  }
  if (!(weights[0] + weights[1] + weights[2] > 0.0)) {
    fail("model.data.splits_string: '{}' has no positive weight{}; give the train split a weight, e.g. \"969,30,1\"",
         splits_string, check.where("model.data.splits_string"));
  }
  return weights;
}

std::array<DocumentRange, 3> split_documents(std::string_view splits_string, std::size_t num_documents) {
  const std::array<double, 3> weights = split_weights(splits_string);
  const double sum = weights[0] + weights[1] + weights[2];
  // Python's round() rounds halves to even, which is nearbyint's default mode.
  ADAMANT_CHECK(std::fegetround() == FE_TONEAREST, "split_documents needs the default rounding mode");
  std::array<std::int64_t, 4> bounds{0, 0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const double share = weights[i] / sum * static_cast<double>(num_documents);
    bounds[i + 1] = bounds[i] + static_cast<std::int64_t>(std::nearbyint(share));
  }
  const std::int64_t excess = bounds[3] - static_cast<std::int64_t>(num_documents);
  for (int i = 1; i < 4; ++i) bounds[i] -= excess;
  std::array<DocumentRange, 3> ranges;
  for (int i = 0; i < 3; ++i) {
    ranges[i] = {static_cast<std::size_t>(std::max<std::int64_t>(bounds[i], 0)),
                 static_cast<std::size_t>(std::max<std::int64_t>(bounds[i + 1], 0))};
  }
  return ranges;
}

}  // namespace adamant::data

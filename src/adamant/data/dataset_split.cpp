#include "adamant/data/dataset_split.h"

#include <algorithm>
#include <cfenv>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "adamant/core/error.h"

namespace adamant::data {
namespace {

std::vector<double> parse_weights(std::string_view splits_string) {
  const char separator = splits_string.find(',') != std::string_view::npos ? ',' : '/';
  std::vector<double> weights;
  std::size_t start = 0;
  while (true) {
    const std::size_t stop = splits_string.find(separator, start);
    std::string field(splits_string.substr(start, stop == std::string_view::npos ? stop : stop - start));
    const auto first = field.find_first_not_of(" \t");
    const auto last = field.find_last_not_of(" \t");
    field = first == std::string::npos ? "" : field.substr(first, last - first + 1);
    double weight = 0.0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), weight);
    if (field.empty() || error != std::errc() || end != field.data() + field.size() || !std::isfinite(weight) ||
        weight < 0.0) {
      fail("model.data.splits_string '{}': '{}' is not a non-negative number; write weights like \"969,30,1\"",
           splits_string, field);
    }
    weights.push_back(weight);
    if (stop == std::string_view::npos) break;
    start = stop + 1;
  }
  return weights;
}

}  // namespace

std::array<DocumentRange, 3> split_documents(std::string_view splits_string, std::size_t num_documents) {
  std::vector<double> weights = parse_weights(splits_string);
  weights.resize(3, 0.0);  // missing splits are empty; extra ones are ignored, as in Megatron
  const double sum = weights[0] + weights[1] + weights[2];
  ADAMANT_CHECK(sum > 0.0, "model.data.splits_string '{}': the weights sum to 0; give the train split a weight",
                splits_string);
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

#include "adamant/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "adamant/core/error.h"
#include "adamant/core/rng.h"

namespace adamant::model {

namespace {

constexpr std::uint64_t kSamplingStream = 0x53414d504c455253ull;  // "SAMPLERS": apart from init and dropout

std::int32_t argmax(std::span<const float> logits, int vocab_size) {
  int best = 0;
  for (int v = 1; v < vocab_size; ++v) {
    if (logits[v] > logits[best]) best = v;
  }
  return best;
}

// Inverse-CDF draw over `candidates` sorted largest first (logit_of(i), id_of(i)), cut to the
// nucleus of mass top_p.
template <typename LogitOf, typename IdOf>
std::int32_t draw_sorted(std::size_t candidates, LogitOf&& logit_of, IdOf&& id_of, float temperature, double uniform,
                         float top_p) {
  const double max_logit = logit_of(0);
  double total = 0.0;
  for (std::size_t i = 0; i < candidates; ++i) total += std::exp((logit_of(i) - max_logit) / temperature);
  if (top_p < 1.0f) {  // keep the shortest prefix of the sorted candidates that holds top_p of the mass
    double kept = 0.0;
    std::size_t count = 0;
    while (count < candidates && kept < top_p * total) {
      kept += std::exp((logit_of(count) - max_logit) / temperature);
      ++count;
    }
    candidates = std::max<std::size_t>(count, 1);
    total = kept > 0.0 ? kept : total;
  }
  const double target = uniform * total;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < candidates; ++i) {
    cumulative += std::exp((logit_of(i) - max_logit) / temperature);
    if (cumulative >= target) return id_of(i);
  }
  return id_of(0);  // only when rounding left target a hair above the total; never a zero-probability id
}

}  // namespace

std::int32_t sample_token(std::span<const float> logits, int vocab_size, float temperature, int top_k, double uniform,
                          std::vector<std::int32_t>& scratch, float top_p) {
  ADAMANT_CHECK(vocab_size >= 1 && static_cast<std::size_t>(vocab_size) <= logits.size(),
                "sample_token: vocab_size {} for {} logits", vocab_size, logits.size());
  ADAMANT_CHECK(top_k >= 0, "sampling: top_k is {}; use 0 (off) or a positive count", top_k);
  ADAMANT_CHECK(top_p > 0.0f && top_p <= 1.0f, "sampling: top_p is {}; use a probability in (0, 1]", top_p);
  if (temperature <= 0.0f || top_k == 1) return argmax(logits, vocab_size);

  // Candidates: every id, or the top_k largest (ties broken towards the lower id).
  scratch.resize(static_cast<std::size_t>(vocab_size));
  std::iota(scratch.begin(), scratch.end(), 0);
  auto larger = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::size_t candidates = scratch.size();
  if (top_k > 0 && static_cast<std::size_t>(top_k) < scratch.size()) {
    candidates = static_cast<std::size_t>(top_k);
    std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(candidates) - 1, scratch.end(),
                     larger);
  }
  std::sort(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(candidates), larger);
  return draw_sorted(
      candidates, [&](std::size_t i) { return logits[scratch[i]]; }, [&](std::size_t i) { return scratch[i]; },
      temperature, uniform, top_p);
}

std::int32_t sample_sorted(std::span<const float> logits, std::span<const std::int32_t> ids, float temperature,
                           double uniform, float top_p) {
  ADAMANT_CHECK(!ids.empty() && logits.size() == ids.size(), "sample_sorted: {} logits for {} ids", logits.size(),
                ids.size());
  ADAMANT_CHECK(top_p > 0.0f && top_p <= 1.0f, "sampling: top_p is {}; use a probability in (0, 1]", top_p);
  if (temperature <= 0.0f) return ids[0];
  return draw_sorted(
      ids.size(), [&](std::size_t i) { return logits[i]; }, [&](std::size_t i) { return ids[i]; }, temperature, uniform,
      top_p);
}

double sampling_uniform(std::uint64_t seed, int row, int step) {
  const PhiloxCounter bits =
      philox_draw(seed, static_cast<std::uint64_t>(step), kSamplingStream + static_cast<std::uint64_t>(row));
  return uniform_double_open(bits[0], bits[1]);
}

std::vector<std::int32_t> generate(GptModel& model, std::span<const std::int32_t> prompt, int max_new_tokens,
                                   float temperature, int top_k, std::uint64_t seed, int vocab_size) {
  const GptConfig& config = model.config();
  ADAMANT_CHECK(!prompt.empty(), "generate: the prompt is empty; give at least one token");
  ADAMANT_CHECK(max_new_tokens >= 0, "generate: max_new_tokens is {}", max_new_tokens);
  ADAMANT_CHECK(vocab_size >= 1 && vocab_size <= config.padded_vocab_size(),
                "generate: vocab_size {} outside 1..{} (the padded vocabulary)", vocab_size,
                config.padded_vocab_size());
  std::vector<std::int32_t> context(prompt.begin(), prompt.end());
  std::vector<float> logits(static_cast<std::size_t>(config.padded_vocab_size()));
  std::vector<std::int32_t> scratch;
  std::vector<std::int32_t> generated;
  generated.reserve(static_cast<std::size_t>(max_new_tokens));
  for (int step = 0; step < max_new_tokens; ++step) {
    const std::size_t window = std::min(context.size(), static_cast<std::size_t>(config.seq_length));
    model.next_token_logits(std::span<const std::int32_t>(context).last(window), logits);
    const std::int32_t token =
        sample_token(logits, vocab_size, temperature, top_k, sampling_uniform(seed, 0, step), scratch);
    context.push_back(token);
    generated.push_back(token);
  }
  return generated;
}

}  // namespace adamant::model

#pragma once
// Autoregressive sampling from a GptModel with temperature and top-k, reproducible
// from a seed (one Philox draw per generated token).
#include <cstdint>
#include <span>
#include <vector>

#include "adamant/model/gpt_model.h"

namespace adamant::model {

// Returns the max_new_tokens tokens that follow `prompt` (the prompt is not repeated).
// temperature <= 0 or top_k == 1 is greedy (argmax, lowest id on ties); top_k = 0 keeps
// every token. Only ids below vocab_size (the unpadded vocabulary) are ever sampled. When
// the context grows past seq_length, the model sees its last seq_length tokens.
std::vector<std::int32_t> generate(GptModel& model, std::span<const std::int32_t> prompt, int max_new_tokens,
                                   float temperature, int top_k, std::uint64_t seed, int vocab_size);

// One draw from softmax(logits[0..vocab_size) / temperature) restricted to the top_k largest and
// then to the smallest set of most likely tokens whose probability reaches top_p (nucleus
// sampling; 1 keeps them all); `uniform` in (0, 1] picks the token by inverse CDF. `scratch` is
// reused between calls.
std::int32_t sample_token(std::span<const float> logits, int vocab_size, float temperature, int top_k, double uniform,
                          std::vector<std::int32_t>& scratch, float top_p = 1.0f);

// The same draw from candidates already sorted largest first (logits[i] is the logit of ids[i]),
// e.g. the top k of a row chosen on the GPU: with the top_k candidates of sample_token's order
// it returns the token sample_token would. temperature <= 0 takes ids[0].
std::int32_t sample_sorted(std::span<const float> logits, std::span<const std::int32_t> ids, float temperature,
                           double uniform, float top_p = 1.0f);

// The Philox uniform of sequence `row`'s draw at `step` (row 0 is generate()'s).
double sampling_uniform(std::uint64_t seed, int row, int step);

}  // namespace adamant::model

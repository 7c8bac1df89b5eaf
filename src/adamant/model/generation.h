#pragma once
// Text generation for a batch of prompts with a key/value cache (GptDecoder), each new
// token passed to a callback as soon as it is chosen. The draws are those of generate()
// in sampler.h (sequence b draws from its own Philox stream), so the same seed gives the
// same tokens on the same device whatever the batch.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "adamant/model/gpt_decoder.h"

namespace adamant::model {

struct GenerationOptions {
  int max_new_tokens = 64;
  // The end-of-document token is not drawn before this many new tokens (NeMo's min_tokens_to_generate).
  int min_new_tokens = 0;
  float temperature = 0.8f;  // 0: greedy
  int top_k = 40;            // 0: every token
  float top_p = 1.0f;        // nucleus; 1: off
  std::uint64_t seed = 1;
  int vocab_size = 0;                 // the unpadded vocabulary: only ids below it are drawn
  std::int32_t end_of_document = -1;  // ends a sequence (and is not returned); -1: none
};

// (sequence, token) for every token kept, in the order drawn.
using TokenCallback = std::function<void(int sequence, std::int32_t token)>;

// The cache needs, per sequence, its prompt plus all but the last new token.
int decoder_capacity_for(std::span<const std::vector<std::int32_t>> prompts, int max_new_tokens);

// New tokens of each prompt (prompts.size() == decoder.batch(), each non-empty, the decoder's
// capacity at least decoder_capacity_for(prompts, max_new_tokens)).
std::vector<std::vector<std::int32_t>> generate_cached(GptDecoder& decoder,
                                                       std::span<const std::vector<std::int32_t>> prompts,
                                                       const GenerationOptions& options,
                                                       const TokenCallback& on_token = {});

}  // namespace adamant::model

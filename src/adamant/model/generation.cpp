#include "adamant/model/generation.h"

#include <algorithm>
#include <cmath>

#include "adamant/core/error.h"
#include "adamant/kernels/decode.h"
#include "adamant/model/sampler.h"

namespace adamant::model {

int decoder_capacity_for(std::span<const std::vector<std::int32_t>> prompts, int max_new_tokens) {
  std::size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
  return static_cast<int>(longest) + std::max(max_new_tokens - 1, 0);
}

std::vector<std::vector<std::int32_t>> generate_cached(GptDecoder& decoder,
                                                       std::span<const std::vector<std::int32_t>> prompts,
                                                       const GenerationOptions& options,
                                                       const TokenCallback& on_token) {
  const int batch = decoder.batch();
  ADAMANT_CHECK(static_cast<int>(prompts.size()) == batch, "generation: {} prompts for a decoder of batch {}",
                prompts.size(), batch);
  ADAMANT_CHECK(options.max_new_tokens >= 0, "generation: max_new_tokens is {}", options.max_new_tokens);
  ADAMANT_CHECK(decoder.capacity() >= decoder_capacity_for(prompts, options.max_new_tokens),
                "generation: a cache of {} positions; these prompts and {} new tokens need {}", decoder.capacity(),
                options.max_new_tokens, decoder_capacity_for(prompts, options.max_new_tokens));
  ADAMANT_CHECK(options.vocab_size >= 1 && options.vocab_size <= decoder.padded_vocab(),
                "generation: vocab_size {} outside 1..{}", options.vocab_size, decoder.padded_vocab());
  std::vector<std::vector<std::int32_t>> generated(static_cast<std::size_t>(batch));
  if (options.max_new_tokens == 0) return generated;
  for (int b = 0; b < batch; ++b) decoder.prefill(b, prompts[static_cast<std::size_t>(b)]);

  std::vector<bool> done(static_cast<std::size_t>(batch), false);
  std::vector<std::int32_t> next(static_cast<std::size_t>(batch), 0);
  std::vector<float> masked;
  std::vector<std::int32_t> scratch;
  const bool has_end = options.end_of_document >= 0 && options.end_of_document < options.vocab_size;
  // Greedy and top-k draws need only the k largest logits, which the decoder picks on its device;
  // every-token (top_k 0) draws read the whole row.
  const bool greedy = options.temperature <= 0.0f || options.top_k == 1;
  const int device_k = greedy ? 1 : options.top_k;
  const bool select_on_device = device_k >= 1 && device_k <= kernels::kMaxDecodeTopK && device_k < options.vocab_size;
  for (int step = 0; step < options.max_new_tokens; ++step) {
    const bool hide_end = has_end && step < options.min_new_tokens;
    if (select_on_device) decoder.select_top(device_k, options.vocab_size, hide_end ? options.end_of_document : -1);
    for (int b = 0; b < batch; ++b) {
      if (done[static_cast<std::size_t>(b)]) continue;
      const double uniform = sampling_uniform(options.seed, b, step);
      std::int32_t token = 0;
      if (select_on_device) {
        const GptDecoder::Candidates top = decoder.candidates(b);
        token = sample_sorted(top.logits, top.ids, greedy ? 0.0f : options.temperature, uniform, options.top_p);
      } else {
        std::span<const float> logits = decoder.logits(b);
        if (hide_end) {
          masked.assign(logits.begin(), logits.end());
          masked[static_cast<std::size_t>(options.end_of_document)] = -INFINITY;
          logits = masked;
        }
        token = sample_token(logits, options.vocab_size, options.temperature, options.top_k, uniform, scratch,
                             options.top_p);
      }
      next[static_cast<std::size_t>(b)] = token;
      if (has_end && token == options.end_of_document) {
        done[static_cast<std::size_t>(b)] = true;
        continue;
      }
      generated[static_cast<std::size_t>(b)].push_back(token);
      if (on_token) on_token(b, token);
    }
    if (step + 1 == options.max_new_tokens || std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    decoder.step(next);  // a finished sequence takes its last token again; its results are ignored
  }
  return generated;
}

}  // namespace adamant::model

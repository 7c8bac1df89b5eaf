// Generation speed with the key/value cache, batch 1 by default, on a randomly initialised
// model of a config's size (the speed does not depend on the weights' values):
//
//   generate_bench configs/gpt3-126m.yaml [--device cpu|cuda] [--prompt-tokens 16] [--new-tokens 256]
//                  [--batch 1] [--reps 3] [--top-k 40]
//
// Prints, per repetition and as the best: new tokens per second of the whole call (prompt
// included) with greedy decoding and with top-k sampling (temperature 0.8). On the CPU the
// thread count is OMP_NUM_THREADS / OPENBLAS_NUM_THREADS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "adamant/core/device.h"
#include "adamant/core/error.h"
#include "adamant/model/generation.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/train_config.h"
#include "bench_flags.h"

namespace {

constexpr int kGpt2Vocab = 50257;

struct BenchArgs {
  std::string config;
  std::string device;
  int prompt_tokens = 16;
  int new_tokens = 256;
  int batch = 1;
  int reps = 3;
  int top_k = 40;
};

// The config first, then the flags (bench_flags.h: a bad value ends the program with status 2).
BenchArgs parse(int argc, char** argv) {
  // The config stands where BenchFlags expects the program's name.
  const bool config_first = argc >= 2 && !std::string_view(argv[1]).starts_with("--");
  const adamant::bench::BenchFlags flags(
      config_first ? argc - 1 : argc, config_first ? argv + 1 : argv, "generate_bench",
      "CONFIG.yaml [--device cpu|cuda] [--prompt-tokens N] [--new-tokens N] [--batch N] [--reps N] [--top-k K]",
      {"--device", "--prompt-tokens", "--new-tokens", "--batch", "--reps", "--top-k"});
  if (!config_first) flags.fail("the config comes first");
  BenchArgs args;
  args.config = argv[1];
  // No --device: the GPU where there is one.
  if (!flags.text("--device", "").empty()) args.device = flags.one_of("--device", "cpu", {"cpu", "cuda"});
  args.prompt_tokens = flags.whole_number("--prompt-tokens", args.prompt_tokens, 1);
  args.new_tokens = flags.whole_number("--new-tokens", args.new_tokens, 1);
  args.batch = flags.whole_number("--batch", args.batch, 1);
  args.reps = flags.whole_number("--reps", args.reps, 1);
  args.top_k = flags.whole_number("--top-k", args.top_k, 0);
  return args;
}

// Where a token's time goes: decoding steps alone (queued back to back, then waited for) and
// the top-k selection with its copy to the host.
void print_step_times(adamant::model::GptDecoder& decoder, const std::vector<std::vector<std::int32_t>>& prompts,
                      int top_k) {
  using clock = std::chrono::steady_clock;
  constexpr int kSteps = 64;
  for (int b = 0; b < decoder.batch(); ++b) decoder.prefill(b, prompts[static_cast<std::size_t>(b)]);
  const std::vector<std::int32_t> tokens(static_cast<std::size_t>(decoder.batch()), 464);
  decoder.step(tokens);  // records the step graph on a GPU
  decoder.step(tokens);
  auto start = clock::now();
  for (int i = 0; i < kSteps && decoder.length(0) + 1 < decoder.capacity(); ++i) decoder.step(tokens);
  decoder.logits(0);  // waits for the steps
  const double step_us = std::chrono::duration<double, std::micro>(clock::now() - start).count() / kSteps;
  start = clock::now();
  for (int i = 0; i < kSteps; ++i) decoder.select_top(top_k, kGpt2Vocab, -1);
  const double select_us = std::chrono::duration<double, std::micro>(clock::now() - start).count() / kSteps;
  std::printf("  one step %.1f us (graph %s), top-%d selection and copy %.1f us\n", step_us,
              decoder.step_graph_recorded() ? "replayed" : "not recorded", top_k, select_us);
}

void run(const BenchArgs& args) {
  using namespace adamant;
  const Device device = args.device.empty()    ? (cuda_available() ? Device::cuda(0) : Device::cpu())
                        : args.device == "cpu" ? Device::cpu()
                                               : Device::cuda(0);
  const train::TrainConfig config = train::load_train_config(args.config, {});
  const model::GptConfig gpt = train::gpt_config_of(config, kGpt2Vocab).whole_model();
  model::GptModel model(gpt, device.is_cpu() ? DType::f32 : DType::bf16, 1, device, 1234);
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(args.batch));
  for (int b = 0; b < args.batch; ++b) {
    for (int t = 0; t < args.prompt_tokens; ++t)
      prompts[static_cast<std::size_t>(b)].push_back((997 * t + 31 * b) % kGpt2Vocab);
  }
  const int capacity = model::decoder_capacity_for(prompts, args.new_tokens);
  ADAMANT_CHECK(capacity <= gpt.seq_length, "--prompt-tokens + --new-tokens exceed the context of {}", gpt.seq_length);
  model::GptDecoder decoder(model, args.batch, args.prompt_tokens, capacity);
  std::printf("generate_bench: %s on %s, %d layers, hidden %d; batch %d, prompt %d tokens, %d new tokens\n",
              args.config.c_str(), device.str().c_str(), gpt.num_layers, gpt.hidden_size, args.batch,
              args.prompt_tokens, args.new_tokens);
  for (const bool greedy : {true, false}) {
    model::GenerationOptions options;
    options.max_new_tokens = args.new_tokens;
    options.temperature = greedy ? 0.0f : 0.8f;
    options.top_k = args.top_k;
    options.vocab_size = kGpt2Vocab;  // no end-of-document: every call makes new_tokens tokens
    double best = 0.0;
    for (int rep = 0; rep < args.reps; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      const auto samples = model::generate_cached(decoder, prompts, options);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::size_t tokens = 0;
      for (const auto& sample : samples) tokens += sample.size();
      const double rate = static_cast<double>(tokens) / seconds;
      best = std::max(best, rate);
      std::printf("  %-8s rep %d: %zu tokens in %.3f s = %.1f tokens/s\n", greedy ? "greedy" : "top-k", rep + 1, tokens,
                  seconds, rate);
    }
    // A step reads every matrix once (bf16 on a GPU and by default on the CPU).
    const double gigabytes = static_cast<double>(model.buffer_numel()) * 2.0 * 1e-9;
    if (!greedy) print_step_times(decoder, prompts, args.top_k);
    std::printf("%s: best %.1f tokens/s (%.2f GB of weights per token: %.0f GB/s)\n", greedy ? "greedy" : "top-k", best,
                gigabytes, gigabytes * best);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "generate_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}

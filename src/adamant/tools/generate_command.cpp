// adamant generate CHECKPOINT (--prompt TEXT | --prompts-file FILE) [--max-tokens N --min-tokens N
//   --temperature T --top-k K --top-p P --seed S --device cpu|cuda --weights bf16|fp32]
// Samples with a key/value cache on the GPU (bf16) or the CPU (fp32); a single prompt's
// tokens are printed as they come.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/data/utf8_stream.h"
#include "adamant/model/generation.h"
#include "adamant/model/gpt_model.h"
#include "adamant/tools/commands.h"
#include "adamant/tools/option_values.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/train_config.h"

namespace adamant::tools {

namespace {

struct GenerateArgs {
  std::string checkpoint;
  std::string prompt;
  std::string prompts_file;
  std::string max_tokens = "64";
  std::string min_tokens = "0";
  std::string temperature = "0.8";
  std::string top_k = "40";
  std::string top_p = "1.0";
  std::string seed = "1";
  std::string device;
  std::string weights = "bf16";
  std::string vocab_dir;
};

std::vector<std::string> read_prompts(const GenerateArgs& args) {
  ADAMANT_CHECK(args.prompt.empty() != args.prompts_file.empty(),
                "generate: give either --prompt TEXT or --prompts-file FILE (one prompt per line)");
  if (!args.prompt.empty()) return {args.prompt};
  std::ifstream in(args.prompts_file);
  ADAMANT_CHECK(in.good(), "generate: cannot read --prompts-file {}", args.prompts_file);
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(line);
  }
  ADAMANT_CHECK(!prompts.empty(), "generate: --prompts-file {} has no prompts; write one per line", args.prompts_file);
  return prompts;
}

Device device_of(const std::string& name) {
  if (name.empty()) return cuda_available() ? Device::cuda(0) : Device::cpu();
  if (name == "cpu") return Device::cpu();
  ADAMANT_CHECK(name == "cuda", "generate: --device {}; use cpu or cuda", name);
  ADAMANT_CHECK(cuda_available(),
                "generate: --device cuda, but no CUDA GPU is visible (or this build has no CUDA); "
                "use --device cpu");
  return Device::cuda(0);
}

// The dtype the decoder's linear layers and classifier read (model/gpt_decoder.h).
DType matrix_dtype_of(const std::string& name, Device device) {
  if (name == "bf16") return DType::bf16;
  ADAMANT_CHECK(name == "fp32", "generate: --weights {}; use bf16 or fp32 (fp32 on the CPU only)", name);
  ADAMANT_CHECK(device.is_cpu(), "generate: --weights fp32 on {}; the GPU decoder reads bf16 weights, use bf16",
                device.str());
  return DType::f32;
}

void run_generate(const GenerateArgs& args) {
  model::GenerationOptions options;
  options.max_new_tokens = parse_int_option("--max-tokens", args.max_tokens, 1, 1 << 20);
  options.min_new_tokens = parse_int_option("--min-tokens", args.min_tokens, 0, options.max_new_tokens);
  options.temperature = parse_float_option("--temperature", args.temperature, 0.0, 100.0);
  options.top_k = parse_int_option("--top-k", args.top_k, 0, 1 << 20);
  options.top_p = parse_float_option("--top-p", args.top_p, 0.0, 1.0);
  ADAMANT_CHECK(options.top_p > 0.0f, "--top-p 0 keeps no token; give a probability in (0, 1]");
  options.seed = parse_seed_option("--seed", args.seed);
  const std::vector<std::string> texts = read_prompts(args);
  const Device device = device_of(args.device);
  const DType matrix_dtype = matrix_dtype_of(args.weights, device);

  const train::TrainConfig config =
      train::parse_train_config(train::checkpoint_config_yaml(args.checkpoint), {}, args.checkpoint + "/model.adm");
  const auto tokenizer = args.vocab_dir.empty() ? data::BpeTokenizer::load(config.data.tokenizer.vocab_file,
                                                                           config.data.tokenizer.merge_file)
                                                : data::BpeTokenizer::load_dir(args.vocab_dir);
  // One process samples from the whole model, whatever tensor-parallel size trained it.
  const model::GptConfig gpt = train::gpt_config_of(config, static_cast<int>(tokenizer.vocab_size())).whole_model();
  options.vocab_size = gpt.vocab_size;
  options.end_of_document = data::BpeTokenizer::kEndOfText;

  std::vector<std::vector<std::int32_t>> prompts;
  for (const std::string& text : texts) {
    prompts.push_back(tokenizer.encode(text));
    ADAMANT_CHECK(!prompts.back().empty(), "generate: a prompt is empty; give some text to continue");
    ADAMANT_CHECK(static_cast<int>(prompts.back().size()) <= gpt.seq_length,
                  "generate: a prompt of {} tokens; the model reads at most {} (model.encoder_seq_length)",
                  prompts.back().size(), gpt.seq_length);
  }
  const int capacity = model::decoder_capacity_for(prompts, options.max_new_tokens);
  ADAMANT_CHECK(capacity <= gpt.seq_length,
                "generate: the longest prompt plus --max-tokens {} need {} positions (the last new token is not "
                "fed back); the model's context is {} "
                "(model.encoder_seq_length); lower --max-tokens to {} or shorten the prompt",
                options.max_new_tokens, capacity, gpt.seq_length, options.max_new_tokens - (capacity - gpt.seq_length));
  std::size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());

  model::GptModel model(gpt, device.is_cpu() ? DType::f32 : DType::bf16, 1, device,
                        static_cast<std::uint64_t>(config.trainer.seed));
  train::load_checkpoint(args.checkpoint, model, nullptr);
  model::GptDecoder decoder(model, static_cast<int>(prompts.size()), static_cast<int>(longest), capacity, matrix_dtype);

  const bool stream = prompts.size() == 1;
  data::Utf8Stream text;
  if (stream) {
    std::fputs(texts[0].c_str(), stdout);
    std::fflush(stdout);
  }
  std::size_t produced = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto samples = model::generate_cached(decoder, prompts, options, [&](int, std::int32_t token) {
    ++produced;
    if (!stream) return;
    const std::string ready = text.push(tokenizer.decode(std::span(&token, 1)));
    std::fwrite(ready.data(), 1, ready.size(), stdout);
    std::fflush(stdout);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stream) {
    const std::string rest = text.finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    for (std::size_t i = 0; i < samples.size(); ++i) {
      std::printf("--- sample %zu ---\n%s%s\n", i + 1, texts[i].c_str(), tokenizer.decode(samples[i]).c_str());
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr, "adamant generate: %zu tokens in %.2f s (%.1f tokens/s) on %s\n", produced, seconds,
               seconds > 0.0 ? static_cast<double>(produced) / seconds : 0.0, device.str().c_str());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Sample text from a checkpoint (GPU when present, key/value cache)");
  auto args = std::make_shared<GenerateArgs>();
  cmd->add_option("checkpoint", args->checkpoint, "checkpoint folder, e.g. runs/gpt3-tiny/checkpoints/step_00000200")
      ->required();
  cmd->add_option("--prompt", args->prompt, "text to continue");
  cmd->add_option("--prompts-file", args->prompts_file, "file with one prompt per line, sampled together as a batch");
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate per prompt (default 64)");
  cmd->add_option("--min-tokens", args->min_tokens,
                  "tokens before the end-of-document token may end a sample (default 0)");
  cmd->add_option("--temperature", args->temperature,
                  "softmax temperature in [0, 100]; 0 picks the most likely token (default 0.8)");
  cmd->add_option("--top-k", args->top_k, "sample among the k most likely tokens; 0: all (default 40)");
  cmd->add_option("--top-p", args->top_p,
                  "nucleus sampling: the most likely tokens holding this probability, "
                  "in (0, 1] (default 1: off)");
  cmd->add_option("--seed", args->seed,
                  "random seed in [0, 2^64); the same seed gives the same text on the same "
                  "device (default 1)");
  cmd->add_option("--device", args->device, "cpu or cuda (default: cuda when a GPU is visible)");
  cmd->add_option("--weights", args->weights,
                  "bf16 or fp32: what the layers read per token; bf16 halves the memory traffic that sets the "
                  "speed (default bf16; fp32 on the CPU only)");
  cmd->add_option("--vocab-dir", args->vocab_dir,
                  "folder with encoder.json and vocab.bpe (default: the files named in the checkpoint's config)");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace adamant::tools

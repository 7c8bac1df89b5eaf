// adamant generate CHECKPOINT --prompt "..." [--max-tokens N --temperature T --top-k K --seed S]
#include <algorithm>
#include <cstdio>
#include <string>

#include "adamant/core/error.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/sampler.h"
#include "adamant/tools/commands.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/train_config.h"

namespace adamant::tools {

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Sample text from a checkpoint");
  struct Args {
    std::string checkpoint;
    std::string prompt;
    int max_tokens = 64;
    float temperature = 0.8f;
    int top_k = 40;
    std::uint64_t seed = 1;
    std::string vocab_dir;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("checkpoint", args->checkpoint, "checkpoint folder, e.g. runs/gpt3-tiny/checkpoints/step_00000150")
      ->required();
  cmd->add_option("--prompt", args->prompt, "text to continue")->required();
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", args->temperature, "softmax temperature; 0 picks the most likely token")
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", args->top_k, "sample among the k most likely tokens (0: all)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--seed", args->seed, "random seed; the same seed gives the same text");
  cmd->add_option("--vocab-dir", args->vocab_dir,
                  "folder with encoder.json and vocab.bpe (default: the files named in the checkpoint's config)");
  cmd->callback([args] {
    const train::TrainConfig config =
        train::parse_train_config(train::checkpoint_config_yaml(args->checkpoint), {}, args->checkpoint + "/model.adm");
    const auto tokenizer = args->vocab_dir.empty() ? data::BpeTokenizer::load(config.model.tokenizer.vocab_file,
                                                                              config.model.tokenizer.merge_file)
                                                   : data::BpeTokenizer::load_dir(args->vocab_dir);
    // One process samples from the whole model, whatever tensor-parallel size trained it.
    const model::GptConfig gpt =
        train::gpt_config_of(config.model, static_cast<int>(tokenizer.vocab_size())).whole_model();
    model::GptModel model(gpt, DType::f32, 1, Device::cpu(), static_cast<std::uint64_t>(config.model.seed));
    train::load_checkpoint(args->checkpoint, model, nullptr);
    const std::vector<std::int32_t> prompt = tokenizer.encode(args->prompt);
    ADAMANT_CHECK(!prompt.empty(), "--prompt is empty; give some text to continue");
    std::vector<std::int32_t> tokens =
        model::generate(model, prompt, args->max_tokens, args->temperature, args->top_k, args->seed, gpt.vocab_size);
    // The sample ends where the model ends the document.
    tokens.erase(std::find(tokens.begin(), tokens.end(), data::BpeTokenizer::kEndOfText), tokens.end());
    std::printf("%s%s\n", args->prompt.c_str(), tokenizer.decode(tokens).c_str());
  });
}

}  // namespace adamant::tools

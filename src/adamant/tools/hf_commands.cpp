// adamant export CHECKPOINT --output DIR [--dtype fp32|bf16|fp16] [--vocab-dir DIR]
// adamant import DIR --output CHECKPOINT
// Hugging Face GPT-2 folders out of and into checkpoints (train/hf_gpt2_folder.h).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "adamant/core/dtype.h"
#include "adamant/tools/commands.h"
#include "adamant/train/hf_gpt2_folder.h"

namespace adamant::tools {

void add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a checkpoint as a Hugging Face GPT-2 folder (safetensors)");
  struct Args {
    std::string checkpoint;
    std::string output;
    std::string dtype;
    std::string vocab_dir;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("checkpoint", args->checkpoint, "checkpoint folder, e.g. runs/gpt3-tiny/checkpoints/step_00000150")
      ->required();
  cmd->add_option("--output,-o", args->output,
                  "folder to write (model.safetensors, config.json, vocab.json, merges.txt)")
      ->required();
  cmd->add_option("--dtype", args->dtype, "weights as fp32, bf16 or fp16 (default: the checkpoint's)");
  cmd->add_option("--vocab-dir", args->vocab_dir,
                  "folder with encoder.json and vocab.bpe (default: the files named in the checkpoint's config)");
  cmd->callback([args] {
    std::optional<DType> dtype;
    if (!args->dtype.empty()) dtype = parse_dtype(args->dtype, "--dtype");
    train::export_hf_gpt2(args->checkpoint, args->output, dtype, args->vocab_dir);
    std::printf("exported %s to %s\n", args->checkpoint.c_str(), args->output.c_str());
  });
}

void add_import_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", "Write a checkpoint (weights only) from a Hugging Face GPT-2 folder");
  struct Args {
    std::string folder;
    std::string output;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("folder", args->folder, "Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer)")
      ->required();
  cmd->add_option("--output,-o", args->output, "checkpoint folder to write")->required();
  cmd->callback([args] {
    train::import_hf_gpt2(args->folder, args->output);
    std::printf("imported %s to %s\n", args->folder.c_str(), args->output.c_str());
  });
}

}  // namespace adamant::tools

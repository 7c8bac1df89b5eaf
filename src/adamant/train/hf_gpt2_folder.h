#pragma once
// Hugging Face GPT-2 folders in and out: model.safetensors (the names and layouts of
// model/hf_gpt2_layout.h), config.json and the tokenizer files vocab.json and merges.txt
// (the same files as GPT-2's encoder.json and vocab.bpe). Any folder that is not a GPT-2
// Adamant can run (another architecture, a missing or misshapen tensor, a damaged file) is an
// adamant::Error naming the file and the tensor or field.
//
// The padded vocabulary rows (Megatron's padding, part of the softmax) are not exported; a
// folder read in gets them as the mean of the real embedding rows, whose logit is the average
// logit, far below the likely tokens', so the imported model predicts as the original does.
#include <filesystem>
#include <optional>
#include <string>

#include "adamant/core/dtype.h"
#include "adamant/model/gpt_config.h"
#include "adamant/model/gpt_model.h"

namespace adamant::train {

inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfVocabFile = "vocab.json";
inline constexpr const char* kHfMergesFile = "merges.txt";

// The whole model described by dir/config.json (vocab_size as there, make_vocab_size_divisible_by
// 128). Throws naming the field for anything Adamant cannot run.
model::GptConfig read_hf_gpt2_config(const std::filesystem::path& dir);

// Writes out/ from a checkpoint folder: the whole model in `dtype` (default: the checkpoint's
// weight dtype), the padded vocabulary cut back. The tokenizer files come from vocab_dir
// (encoder.json + vocab.bpe), else from the checkpoint folder's vocab.json + merges.txt, else
// from the files named in the checkpoint's config.
void export_hf_gpt2(const std::filesystem::path& checkpoint, const std::filesystem::path& out,
                    std::optional<DType> dtype, const std::filesystem::path& vocab_dir = {});

// Writes a checkpoint folder (weights only, step 0; train/checkpoint.h) from a Hugging Face
// GPT-2 folder, with the folder's tokenizer files beside model.adm and weights in the file's dtype.
void import_hf_gpt2(const std::filesystem::path& dir, const std::filesystem::path& checkpoint);

// model.restore_from_path: loads a Hugging Face GPT-2 folder (or an Adamant checkpoint folder)
// into `model`, any tensor-parallel rank, before the optimizer is attached. The model's sizes,
// vocabulary and GELU form must be the folder's; its model.encoder_seq_length may be shorter
// than the folder's n_positions (the first position embeddings are used).
void load_pretrained_weights(const std::filesystem::path& dir, model::GptModel& model);

}  // namespace adamant::train

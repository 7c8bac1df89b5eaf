#pragma once
// `adamant preprocess`: text to a Megatron indexed dataset, like Megatron-LM's
// tools/preprocess_data.py. Input by extension:
//   .jsonl / .json  one JSON object per line (blank lines skipped); the string
//                   field `json_key` of each line is one document.
//   .txt            the whole file is one document, or with split_paragraphs one
//                   document per paragraph (paragraphs are separated by lines that
//                   are empty or whitespace only; a paragraph keeps its inner newlines).
// Each document is GPT-2 BPE encoded (special tokens as plain text, as Megatron
// does), followed by <|endoftext|> when append_eod, and written as one sequence.
// Documents whose text encodes to nothing are skipped. Output:
// <output_prefix>_<json_key>_document.{bin,idx}, uint16 tokens (GPT-2 vocabulary).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace adamant::data {

struct PreprocessOptions {
  std::filesystem::path input;
  std::filesystem::path output_prefix;
  std::filesystem::path vocab_dir = ".cache/data/gpt2";  // encoder.json + vocab.bpe
  std::string json_key = "text";
  int workers = 1;  // encoding threads; the output does not depend on it
  bool append_eod = true;
  bool split_paragraphs = false;  // .txt only
  bool show_progress = false;     // on stderr
  // Input read and encoded per batch of about this many bytes: bounds memory; the output does not depend on it.
  std::size_t batch_bytes = std::size_t{4} << 20;
};

struct PreprocessResult {
  std::filesystem::path dataset_prefix;  // what model.data.data_prefix names
  std::int64_t documents = 0;
  std::int64_t skipped_empty_documents = 0;
  std::int64_t tokens = 0;
  std::int64_t input_bytes = 0;
};

// "<output_prefix>_<json_key>_document".
std::filesystem::path preprocess_dataset_prefix(const PreprocessOptions& options);

// Throws adamant::Error for a missing input, an unknown extension, a malformed JSON
// line or a line without the key (naming the file and line).
PreprocessResult preprocess(const PreprocessOptions& options);

}  // namespace adamant::data

// Fuzzes `adamant preprocess`'s input side: the input bytes as a .jsonl file (or, when the
// first byte is odd, as a .txt file split into paragraphs) are tokenized into a dataset, which
// must then open. Needs the GPT-2 tokenizer files (ADAMANT_DATA_DIR, as the tests do).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "adamant/core/error.h"
#include "adamant/data/indexed_dataset.h"
#include "adamant/data/preprocess.h"
#include "fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool text = (data[0] & 1) != 0;
  adamant::data::PreprocessOptions options;
  options.input = adamant::fuzzing::scratch() / (text ? "input.txt" : "input.jsonl");
  options.output_prefix = adamant::fuzzing::scratch() / "out";
  const char* data_dir = std::getenv("ADAMANT_DATA_DIR");
  options.vocab_dir = std::filesystem::path(data_dir != nullptr ? data_dir : ".cache/data") / "gpt2";
  options.split_paragraphs = text;
  options.batch_bytes = 64;  // several batches even for small inputs
  adamant::fuzzing::write_bytes(options.input, data + 1, size - 1);
  try {
    const adamant::data::PreprocessResult result = adamant::data::preprocess(options);
    const auto dataset = adamant::data::IndexedDataset::open(result.dataset_prefix);
    if (dataset.num_tokens() != result.tokens) __builtin_trap();
  } catch (const adamant::Error&) {
  }
  return 0;
}

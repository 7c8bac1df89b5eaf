// `adamant preprocess`: the command-line face of data::preprocess (see data/preprocess.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <thread>

#include "adamant/data/preprocess.h"

namespace adamant::tools {

void add_preprocess_command(CLI::App& app) {
  // Shared with the callback, which runs after parsing, when this function has long returned.
  auto options = std::make_shared<data::PreprocessOptions>();
  options->workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options->show_progress = true;

  CLI::App* command = app.add_subcommand("preprocess",
                                         "Tokenize text with GPT-2 BPE into a Megatron/NeMo indexed dataset "
                                         "<output-prefix>_<json-key>_document.{bin,idx}");
  command
      ->add_option("--input", options->input,
                   "input file: .jsonl (one JSON object per line, text in --json-key) or .txt (plain text)")
      ->required();
  command->add_option("--output-prefix", options->output_prefix, "output path prefix, e.g. data/moby_dick")->required();
  command->add_option("--vocab-dir", options->vocab_dir, "folder with encoder.json and vocab.bpe")
      ->capture_default_str();
  command->add_option("--json-key", options->json_key, "JSON field holding each document's text")
      ->capture_default_str();
  command->add_option("--workers", options->workers, "encoding threads (the output does not depend on it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--append-eod,!--no-append-eod", options->append_eod,
                    "append <|endoftext|> (50256) to every document (default on)");
  command->add_flag("--split-paragraphs", options->split_paragraphs,
                    ".txt input: one document per paragraph (paragraphs are separated by blank lines) instead of "
                    "one document for the whole file");
  command->add_flag("--progress,!--no-progress", options->show_progress, "progress on stderr (default on)");

  command->callback([options] {
    const data::PreprocessResult result = data::preprocess(*options);
    fmt::print("preprocess: wrote {}.bin and .idx: {} documents, {} tokens", result.dataset_prefix.string(),
               result.documents, result.tokens);
    if (result.skipped_empty_documents > 0) fmt::print(" ({} empty documents skipped)", result.skipped_empty_documents);
    fmt::print("\nuse it with model.data.data_prefix=[{}]\n", result.dataset_prefix.string());
  });
}

}  // namespace adamant::tools

#include "adamant/data/preprocess.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/data/indexed_dataset.h"
#include "adamant/data/progress_meter.h"

namespace adamant::data {
namespace {

// A batch is encoded in parallel, then written in order; its size bounds memory.
constexpr std::size_t kBatchDocuments = 4096;

enum class InputFormat { json_lines, text };

InputFormat detect_format(const std::filesystem::path& input) {
  const std::string extension = input.extension().string();
  if (extension == ".jsonl" || extension == ".json") return InputFormat::json_lines;
  if (extension == ".txt") return InputFormat::text;
  fail(
      "preprocess: cannot tell the format of {} from its extension '{}'; use .jsonl (one JSON object per line) or "
      ".txt (plain text)",
      input.string(), extension);
}

bool is_blank(std::string_view line) { return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos; }

// Raw input of one document: a JSON line (parsed by the encoding thread) or the document's text.
struct RawDocument {
  std::string content;
  std::int64_t line = 0;  // 1-based line of the input where it starts
};

class DocumentReader {
 public:
  DocumentReader(const PreprocessOptions& options, InputFormat format)
      : path_(options.input),
        format_(format),
        split_paragraphs_(options.split_paragraphs),
        batch_bytes_(options.batch_bytes) {
    stream_.open(path_, std::ios::binary);
    ADAMANT_CHECK(stream_.is_open(), "preprocess: cannot read input file {}; check --input", path_.string());
  }

  // Fills `batch` with the next documents; returns false once the input is exhausted.
  bool read_batch(std::vector<RawDocument>& batch) {
    batch.clear();
    std::size_t bytes = 0;
    if (format_ == InputFormat::text && !split_paragraphs_) {
      if (done_) return false;
      done_ = true;
      RawDocument whole{std::string(std::istreambuf_iterator<char>(stream_), {}), 1};
      bytes_read_ += static_cast<std::int64_t>(whole.content.size());
      batch.push_back(std::move(whole));
      return true;
    }
    std::string line;
    // Read on until the batch is full, but always until it holds one document (or the input ends).
    while ((batch.empty() || (bytes < batch_bytes_ && batch.size() < kBatchDocuments)) && std::getline(stream_, line)) {
      ++line_number_;
      bytes += line.size() + 1;
      bytes_read_ += static_cast<std::int64_t>(line.size()) + 1;
      if (format_ == InputFormat::json_lines) {
        if (!is_blank(line)) batch.push_back({std::move(line), line_number_});
        continue;
      }
      if (is_blank(line)) {
        if (!paragraph_.content.empty()) batch.push_back(std::exchange(paragraph_, {}));
        continue;
      }
      if (paragraph_.content.empty()) {
        paragraph_.line = line_number_;
      } else {
        paragraph_.content += '\n';
      }
      paragraph_.content += line;
    }
    if (stream_.eof() && !paragraph_.content.empty()) batch.push_back(std::exchange(paragraph_, {}));
    return !batch.empty();
  }

  std::int64_t bytes_read() const { return bytes_read_; }

 private:
  std::filesystem::path path_;
  InputFormat format_;
  bool split_paragraphs_;
  std::size_t batch_bytes_;
  std::ifstream stream_;
  std::int64_t line_number_ = 0;
  std::int64_t bytes_read_ = 0;
  bool done_ = false;
  RawDocument paragraph_;  // a paragraph still being read; it may continue in the next batch
};

// The text of a JSON line's `key` field, with errors naming file and line.
std::string json_text(const RawDocument& document, const std::string& key, const std::filesystem::path& input) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(document.content);
  } catch (const nlohmann::json::parse_error& error) {
    fail("preprocess: {} line {}: malformed JSON ({}); each line must be one JSON object", input.string(),
         document.line, error.what());
  }
  ADAMANT_CHECK(object.is_object(), "preprocess: {} line {}: expected a JSON object, found {}", input.string(),
                document.line, object.type_name());
  const auto field = object.find(key);
  ADAMANT_CHECK(field != object.end(), "preprocess: {} line {}: no \"{}\" field; name the text field with --json-key",
                input.string(), document.line, key);
  ADAMANT_CHECK(field->is_string(), "preprocess: {} line {}: field \"{}\" is a {}, not a string", input.string(),
                document.line, key, field->type_name());
  return field->get<std::string>();
}

// Encodes the batch on `workers` threads; results[i] belongs to batch[i], whatever thread made it.
void encode_batch(const std::vector<RawDocument>& batch, const BpeTokenizer& tokenizer,
                  const PreprocessOptions& options, InputFormat format,
                  std::vector<std::vector<std::int32_t>>& results) {
  results.assign(batch.size(), {});
  std::vector<std::exception_ptr> errors(batch.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < batch.size(); i = next.fetch_add(1)) {
      try {
        const RawDocument& document = batch[i];
        results[i] = format == InputFormat::json_lines
                         ? tokenizer.encode(json_text(document, options.json_key, options.input))
                         : tokenizer.encode(document.content);
        if (options.append_eod && !results[i].empty()) results[i].push_back(tokenizer.eod());
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const auto threads = std::min<std::size_t>(static_cast<std::size_t>(options.workers), batch.size());
  {
    std::vector<std::jthread> helpers;
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
  }
  // The first failing document in input order decides the message, so it does not depend on timing.
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace

std::filesystem::path preprocess_dataset_prefix(const PreprocessOptions& options) {
  return std::filesystem::path(options.output_prefix.string() + "_" + options.json_key + "_document");
}

PreprocessResult preprocess(const PreprocessOptions& options) {
  ADAMANT_CHECK(!options.input.empty(), "preprocess: no input file; pass --input FILE.jsonl or FILE.txt");
  ADAMANT_CHECK(std::filesystem::is_regular_file(options.input),
                "preprocess: input file {} does not exist or is not a file; check --input", options.input.string());
  ADAMANT_CHECK(!options.output_prefix.empty(),
                "preprocess: no output prefix; pass --output-prefix such as "
                "data/moby_dick");
  ADAMANT_CHECK(!options.json_key.empty(), "preprocess: --json-key must not be empty");
  ADAMANT_CHECK(options.workers >= 1, "preprocess: --workers {} must be at least 1", options.workers);
  ADAMANT_CHECK(std::filesystem::is_regular_file(options.vocab_dir / "encoder.json") &&
                    std::filesystem::is_regular_file(options.vocab_dir / "vocab.bpe"),
                "preprocess: {} lacks encoder.json or vocab.bpe; run scripts/fetch_data.sh or pass --vocab-dir",
                options.vocab_dir.string());
  const InputFormat format = detect_format(options.input);
  const BpeTokenizer tokenizer = BpeTokenizer::load_dir(options.vocab_dir);

  PreprocessResult result;
  result.dataset_prefix = preprocess_dataset_prefix(options);
  IndexedDatasetBuilder builder(result.dataset_prefix, best_fitting_token_dtype(tokenizer.vocab_size()));
  ProgressMeter meter(options.show_progress ? stderr : nullptr,
                      static_cast<std::int64_t>(std::filesystem::file_size(options.input)));
  DocumentReader reader(options, format);
  std::vector<RawDocument> batch;
  std::vector<std::vector<std::int32_t>> encoded;
  while (reader.read_batch(batch)) {
    encode_batch(batch, tokenizer, options, format, encoded);
    for (const auto& tokens : encoded) {
      if (tokens.empty()) {
        ++result.skipped_empty_documents;
        continue;
      }
      builder.add_document(tokens);
      ++result.documents;
      result.tokens += static_cast<std::int64_t>(tokens.size());
    }
    meter.update(result.documents, reader.bytes_read());
  }
  ADAMANT_CHECK(result.documents > 0, "preprocess: {} holds no non-empty document (with --json-key \"{}\")",
                options.input.string(), options.json_key);
  builder.finalize();
  result.input_bytes = reader.bytes_read();
  meter.finish(result.documents, result.input_bytes, result.tokens);
  return result;
}

}  // namespace adamant::data

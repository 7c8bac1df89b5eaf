// The recorded matmul algorithm table as text (matmul_algorithms.h).
#include "adamant/kernels/matmul_algorithms.h"

#include <fmt/format.h>

#include <optional>

#include "adamant/core/atomic_file.h"
#include "adamant/core/error.h"
#include "adamant/core/file_read.h"
#include "adamant/core/number_text.h"

namespace adamant::kernels {

namespace {

constexpr std::string_view kFileHeader =
    "# Adamant: recorded cuBLASLt matmul algorithms, one choice per line (adamant tune-matmul writes it;\n"
    "# trainer.matmul_algorithms reads it). A line holds on its GPU and cuBLASLt version only.\n";

// The columns of a line, in order. The shape's fields are cuBLASLt's enum values.
constexpr std::array<std::string_view, 31> kColumns = {
    "gpu",           "cublaslt",     "transa",   "transb",    "m",          "n",         "k",
    "lda",           "ldb",          "ldc",      "a_type",    "b_type",     "c_type",    "epilogue",
    "bias_type",     "align_a",      "align_b",  "align_c",   "align_bias", "algorithm", "id",
    "tile",          "stages",       "split_k",  "reduction", "swizzle",    "custom",    "inner_shape",
    "cluster_shape", "heuristic_us", "chosen_us"};

constexpr int kAlgorithmWords = 8;

// One line's fields, parsed in column order; errors name the source, the line and the column.
class LineFields {
 public:
  LineFields(std::vector<std::string_view> fields, std::string_view source, std::size_t line)
      : fields_(std::move(fields)), source_(source), line_(line) {
    if (fields_.size() != kColumns.size()) {
      fail("{} line {}: {} fields, expected {} ({} ...); rewrite the file with adamant tune-matmul", source_, line_,
           fields_.size(), kColumns.size(), fmt::join(kColumns.begin(), kColumns.begin() + 5, " "));
    }
  }

  std::string_view text() { return fields_[next_++]; }

  template <typename Integer>
  Integer integer(int base = 10) {
    const std::string_view field = fields_[next_];
    const std::optional<Integer> value = number_from_text<Integer>(field, base);
    if (!value) bad(field, base == 16 ? "a hexadecimal integer" : "an integer in range");
    ++next_;
    return *value;
  }

  double microseconds() {
    const std::string_view field = fields_[next_];
    const std::optional<double> value = number_from_text<double>(field);
    if (!value || *value < 0) bad(field, "a time in us");
    ++next_;
    return *value;
  }

  std::array<std::uint64_t, kAlgorithmWords> algorithm() {
    const std::string_view field = fields_[next_];
    std::array<std::uint64_t, kAlgorithmWords> words{};
    std::size_t start = 0;
    for (int i = 0; i < kAlgorithmWords; ++i) {
      const std::size_t end = i + 1 < kAlgorithmWords ? field.find(':', start) : field.size();
      if (end == std::string_view::npos) bad(field, "8 hexadecimal words joined by ':'");
      const std::string_view word = field.substr(start, end - start);
      const std::optional<std::uint64_t> number = number_from_text<std::uint64_t>(word, 16);
      if (!number) bad(field, "8 hexadecimal words joined by ':'");
      words[i] = *number;
      start = end + 1;
    }
    ++next_;
    return words;
  }

 private:
  [[noreturn]] void bad(std::string_view field, std::string_view expected) const {
    fail("{} line {}: column {} is '{}', not {}; rewrite the file with adamant tune-matmul", source_, line_,
         kColumns[next_], field, expected);
  }

  std::vector<std::string_view> fields_;
  std::string_view source_;
  std::size_t line_;
  std::size_t next_ = 0;
};

std::vector<std::string_view> split_whitespace(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
    if (end > i) fields.push_back(line.substr(i, end - i));
    i = end;
  }
  return fields;
}

MatmulAlgorithmRecord parse_record(LineFields& f) {
  MatmulAlgorithmRecord r;
  r.target.gpu = std::string(f.text());
  r.target.cublaslt_version = f.integer<std::uint64_t>();
  MatmulShape& s = r.shape;
  s.transa = f.integer<std::int32_t>();
  s.transb = f.integer<std::int32_t>();
  s.m = f.integer<std::uint64_t>();
  s.n = f.integer<std::uint64_t>();
  s.k = f.integer<std::uint64_t>();
  s.lda = f.integer<std::int64_t>();
  s.ldb = f.integer<std::int64_t>();
  s.ldc = f.integer<std::int64_t>();
  s.a_type = f.integer<std::int32_t>();
  s.b_type = f.integer<std::int32_t>();
  s.c_type = f.integer<std::int32_t>();
  s.epilogue = f.integer<std::uint32_t>();
  s.bias_type = f.integer<std::int32_t>();
  s.align_a = f.integer<std::uint32_t>();
  s.align_b = f.integer<std::uint32_t>();
  s.align_c = f.integer<std::uint32_t>();
  s.align_bias = f.integer<std::uint32_t>();
  r.choice.algorithm = f.algorithm();
  MatmulAlgorithmConfig& c = r.choice.config;
  c.id = f.integer<std::int32_t>();
  c.tile = f.integer<std::uint32_t>();
  c.stages = f.integer<std::uint32_t>();
  c.split_k = f.integer<std::int32_t>();
  c.reduction = f.integer<std::uint32_t>();
  c.swizzle = f.integer<std::uint32_t>();
  c.custom = f.integer<std::uint32_t>();
  c.inner_shape = f.integer<std::uint32_t>();
  c.cluster_shape = f.integer<std::uint32_t>();
  r.choice.heuristic_us = f.microseconds();
  r.choice.chosen_us = f.microseconds();
  return r;
}

std::string format_record(const MatmulAlgorithmRecord& r) {
  const MatmulShape& s = r.shape;
  const MatmulAlgorithmConfig& c = r.choice.config;
  std::string words;
  for (int i = 0; i < kAlgorithmWords; ++i) {
    words += fmt::format("{}{:016x}", i == 0 ? "" : ":", r.choice.algorithm[i]);
  }
  return fmt::format(
      "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {:.3f} {:.3f}\n",
      r.target.gpu, r.target.cublaslt_version, s.transa, s.transb, s.m, s.n, s.k, s.lda, s.ldb, s.ldc, s.a_type,
      s.b_type, s.c_type, s.epilogue, s.bias_type, s.align_a, s.align_b, s.align_c, s.align_bias, words, c.id, c.tile,
      c.stages, c.split_k, c.reduction, c.swizzle, c.custom, c.inner_shape, c.cluster_shape, r.choice.heuristic_us,
      r.choice.chosen_us);
}

}  // namespace

const char* matmul_type_name(std::int32_t cuda_data_type) {
  switch (cuda_data_type) {
    case matmul_type::kF32:
      return "fp32";
    case matmul_type::kF16:
      return "fp16";
    case matmul_type::kBF16:
      return "bf16";
    default:
      return "?";
  }
}

MatmulAlgorithmTable MatmulAlgorithmTable::read(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) {
    fail(
        "matmul algorithms file {}: cannot read it; give an existing file (adamant tune-matmul CONFIG --output {} "
        "records one) or leave trainer.matmul_algorithms empty",
        path.string(), path.string());
  }
  return parse(read_text_file(path, "matmul algorithms file"), path.string());
}

MatmulAlgorithmTable MatmulAlgorithmTable::parse(std::string_view text, std::string_view source) {
  MatmulAlgorithmTable table;
  table.source_ = std::string(source);
  std::map<std::pair<MatmulTarget, MatmulShape>, std::size_t> first_line;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    std::vector<std::string_view> fields = split_whitespace(line);
    if (fields.empty() || fields.front().front() == '#') continue;
    LineFields parsed(std::move(fields), source, line_number);
    const MatmulAlgorithmRecord record = parse_record(parsed);
    const auto [at, inserted] = first_line.emplace(std::pair{record.target, record.shape}, line_number);
    if (!inserted) {
      fail("{} line {}: the same GPU, cuBLASLt version and shape as line {}; keep one of the two lines", source,
           line_number, at->second);
    }
    table.set(record);
  }
  return table;
}

std::string MatmulAlgorithmTable::to_text() const {
  std::string text(kFileHeader);
  text += fmt::format("# {}\n", fmt::join(kColumns, " "));
  for (const MatmulAlgorithmRecord& record : records()) text += format_record(record);
  return text;
}

void MatmulAlgorithmTable::write(const std::filesystem::path& path) const {
  write_file_atomically(path, to_text(), "matmul algorithms file");
}

void MatmulAlgorithmTable::set(const MatmulAlgorithmRecord& record) {
  choices_[{record.target, record.shape}] = record.choice;
}

const MatmulAlgorithmChoice* MatmulAlgorithmTable::find(const MatmulTarget& target, const MatmulShape& shape) const {
  const auto it = choices_.find({target, shape});
  return it == choices_.end() ? nullptr : &it->second;
}

std::size_t MatmulAlgorithmTable::count_for(const MatmulTarget& target) const {
  std::size_t count = 0;
  for (const auto& [key, choice] : choices_) count += key.first == target ? 1 : 0;
  return count;
}

std::vector<MatmulAlgorithmRecord> MatmulAlgorithmTable::records() const {
  std::vector<MatmulAlgorithmRecord> out;
  out.reserve(choices_.size());
  for (const auto& [key, choice] : choices_) out.push_back({key.first, key.second, choice});
  return out;
}

}  // namespace adamant::kernels

#pragma once
// Recorded cuBLASLt algorithm choices: which algorithm each GEMM of a run uses, timed once
// by `adamant tune-matmul` and read back by every later run (`trainer.matmul_algorithms`).
//
// cuBLASLt's heuristics give a first answer that is often not its fastest algorithm for a
// problem (bench/matmul_algorithm_bench.cu). Timing the candidates at every start-up would
// make the algorithm, and so the bits of every product, depend on timing noise; a recorded
// choice keeps runs bitwise repeatable. A choice holds only on the GPU model and the
// cuBLASLt version it was timed with (MatmulTarget): elsewhere the heuristics choose.
//
// The table is text, one choice per line (docs/architecture.md, "Recorded GEMM
// algorithms"). Parsing and writing are plain C++ (CPU tests cover them); timing and using
// the choices are in kernels/cuda.
#include <array>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace adamant::kernels {

class Workspace;

// The cudaDataType_t values of the operand types the matmuls use, for code that does not
// include CUDA (kernels/cuda/matmul_tuning_cuda.cpp checks them against CUDA's constants).
namespace matmul_type {
constexpr std::int32_t kF32 = 0;
constexpr std::int32_t kF16 = 2;
constexpr std::int32_t kBF16 = 14;
}  // namespace matmul_type

// "fp32", "fp16" or "bf16" for a MatmulShape's operand type; "?" for any other.
const char* matmul_type_name(std::int32_t cuda_data_type);

// A GEMM as cuBLASLt sees it (column-major, D = C in place), in cuBLASLt's own enum
// values: everything its heuristics look at. Equal shapes share one plan and one choice.
struct MatmulShape {
  std::int32_t transa = 0;  // cublasOperation_t
  std::int32_t transb = 0;
  std::uint64_t m = 0;
  std::uint64_t n = 0;
  std::uint64_t k = 0;
  std::int64_t lda = 0;
  std::int64_t ldb = 0;
  std::int64_t ldc = 0;
  std::int32_t a_type = 0;  // cudaDataType_t
  std::int32_t b_type = 0;
  std::int32_t c_type = 0;
  std::uint32_t epilogue = 1;  // cublasLtEpilogue_t (1: none)
  std::int32_t bias_type = 0;  // only read with a bias epilogue
  // Byte alignments of the operands (powers of two up to 256): algorithms that need more
  // than the actual pointers have are excluded.
  std::uint32_t align_a = 256;
  std::uint32_t align_b = 256;
  std::uint32_t align_c = 256;
  std::uint32_t align_bias = 256;

  auto operator<=>(const MatmulShape&) const = default;
};

// Where a choice was timed: it holds on the same GPU model and cuBLASLt version only.
struct MatmulTarget {
  std::string gpu;  // "NVIDIA_H200/sm_90/132": name (spaces as '_'), compute capability, multiprocessors
  std::uint64_t cublaslt_version = 0;

  auto operator<=>(const MatmulTarget&) const = default;
};

// cuBLASLt's algorithm configuration attributes, readable (and checked against the
// serialised algorithm when a run loads it).
struct MatmulAlgorithmConfig {
  std::int32_t id = 0;
  std::uint32_t tile = 0;
  std::uint32_t stages = 0;
  std::int32_t split_k = 1;
  std::uint32_t reduction = 0;
  std::uint32_t swizzle = 0;
  std::uint32_t custom = 0;
  std::uint32_t inner_shape = 0;
  std::uint32_t cluster_shape = 0;

  auto operator<=>(const MatmulAlgorithmConfig&) const = default;
};

struct MatmulAlgorithmChoice {
  // cublasLtMatmulAlgo_t as cuBLASLt serialises it (valid for the same library version).
  std::array<std::uint64_t, 8> algorithm{};
  MatmulAlgorithmConfig config;
  double heuristic_us = 0;  // the heuristics' first answer, median time when tuned
  double chosen_us = 0;     // this algorithm's

  bool operator==(const MatmulAlgorithmChoice&) const = default;
};

struct MatmulAlgorithmRecord {
  MatmulTarget target;
  MatmulShape shape;
  MatmulAlgorithmChoice choice;
};

class MatmulAlgorithmTable {
 public:
  MatmulAlgorithmTable() = default;

  // Throws adamant::Error naming the file, the line and the fix when it is missing or malformed.
  static MatmulAlgorithmTable read(const std::filesystem::path& path);
  // `source` names the text in errors.
  static MatmulAlgorithmTable parse(std::string_view text, std::string_view source);
  std::string to_text() const;
  // Written under a temporary name and renamed into place.
  void write(const std::filesystem::path& path) const;

  // Adds the record, replacing the choice of the same target and shape.
  void set(const MatmulAlgorithmRecord& record);
  // The choice for `shape` on `target`, or null.
  const MatmulAlgorithmChoice* find(const MatmulTarget& target, const MatmulShape& shape) const;
  std::size_t size() const { return choices_.size(); }
  std::size_t count_for(const MatmulTarget& target) const;
  std::vector<MatmulAlgorithmRecord> records() const;
  // The file it was read from (or the parse source); names it in errors.
  const std::string& source() const { return source_; }

 private:
  std::map<std::pair<MatmulTarget, MatmulShape>, MatmulAlgorithmChoice> choices_;
  std::string source_;
};

// The GPU and cuBLASLt version of `workspace` (a GPU workspace made for matmuls).
MatmulTarget matmul_target(const Workspace& workspace);

// How tune_matmul_algorithms times the candidates.
struct MatmulTuningOptions {
  int candidates = 16;   // cuBLASLt's heuristic answers considered per problem
  int repetitions = 20;  // timed runs per candidate (after 3 untimed), the median counts
  // A candidate replaces the heuristics' first answer only when it is at least this
  // fraction faster (timing noise does not change the choice back and forth).
  double min_gain = 0.02;
};

// Times cuBLASLt's candidate algorithms for every problem `workspace` has run so far and
// returns the fastest of each (the heuristics' first answer unless another one beats it by
// options.min_gain), among those that give the same bits twice from the same inputs and
// agree with the first answer. Synchronises the device; allocates the operands. A GPU
// workspace made for matmuls only.
std::vector<MatmulAlgorithmRecord> tune_matmul_algorithms(Workspace& workspace, const MatmulTuningOptions& options);

}  // namespace adamant::kernels

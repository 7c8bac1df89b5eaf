// The recorded matmul algorithm table as text (kernels/matmul_algorithms.h): what is
// written reads back as the same choices, lookups match on GPU, library version and the
// whole shape, and malformed files are refused naming the line and the column.
#include "adamant/kernels/matmul_algorithms.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "adamant/core/error.h"

namespace adamant::kernels {
namespace {

MatmulAlgorithmRecord sample_record() {
  MatmulAlgorithmRecord r;
  r.target = {"NVIDIA_H200/sm_90/132", 130100};
  r.shape.transa = 1;
  r.shape.transb = 0;
  r.shape.m = 2304;
  r.shape.n = 16384;
  r.shape.k = 768;
  r.shape.lda = 768;
  r.shape.ldb = 768;
  r.shape.ldc = 2304;
  r.shape.a_type = 14;
  r.shape.b_type = 14;
  r.shape.c_type = 14;
  r.shape.epilogue = 4;
  r.shape.bias_type = 14;
  r.shape.align_bias = 16;
  r.choice.algorithm = {0x1, 0xfedcba9876543210ull, 0, 0x42, 0xffffffffffffffffull, 7, 8, 9};
  r.choice.config = {66, 20, 25, 1, 0, 1, 0, 0, 2};
  r.choice.heuristic_us = 81.25;
  r.choice.chosen_us = 74.5;
  return r;
}

// The error message of parsing `text`, or "" when it parses.
std::string parse_error(const std::string& text) {
  try {
    MatmulAlgorithmTable::parse(text, "table.tsv");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MatmulAlgorithms, TextReadsBackAsTheSameChoices) {
  MatmulAlgorithmTable table;
  const MatmulAlgorithmRecord first = sample_record();
  MatmulAlgorithmRecord second = first;
  second.shape.k = 3072;  // another shape
  second.choice.config.split_k = 3;
  MatmulAlgorithmRecord other_gpu = first;
  other_gpu.target.gpu = "NVIDIA_A100-SXM4-80GB/sm_80/108";
  table.set(first);
  table.set(second);
  table.set(other_gpu);

  const MatmulAlgorithmTable read = MatmulAlgorithmTable::parse(table.to_text(), "text");
  ASSERT_EQ(read.size(), 3u);
  const MatmulAlgorithmChoice* found = read.find(first.target, first.shape);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(*found, first.choice);
  ASSERT_NE(read.find(second.target, second.shape), nullptr);
  EXPECT_EQ(read.find(second.target, second.shape)->config.split_k, 3);
  EXPECT_EQ(read.count_for(first.target), 2u);
  EXPECT_EQ(read.count_for(other_gpu.target), 1u);
  EXPECT_EQ(read.to_text(), table.to_text());
}

TEST(MatmulAlgorithms, LookupNeedsTheSameGpuLibraryAndShape) {
  MatmulAlgorithmTable table;
  const MatmulAlgorithmRecord r = sample_record();
  table.set(r);
  MatmulTarget newer = r.target;
  newer.cublaslt_version += 1;
  EXPECT_EQ(table.find(newer, r.shape), nullptr);
  MatmulShape less_aligned = r.shape;
  less_aligned.align_a = 16;
  EXPECT_EQ(table.find(r.target, less_aligned), nullptr);
  MatmulShape no_bias = r.shape;
  no_bias.epilogue = 1;
  EXPECT_EQ(table.find(r.target, no_bias), nullptr);
  EXPECT_NE(table.find(r.target, r.shape), nullptr);
}

TEST(MatmulAlgorithms, SetReplacesTheChoiceOfTheSameShape) {
  MatmulAlgorithmTable table;
  MatmulAlgorithmRecord r = sample_record();
  table.set(r);
  r.choice.config.tile = 99;
  r.choice.chosen_us = 70.0;
  table.set(r);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table.find(r.target, r.shape)->config.tile, 99u);
  EXPECT_EQ(table.find(r.target, r.shape)->chosen_us, 70.0);
}

TEST(MatmulAlgorithms, MalformedLinesNameTheLineAndColumn) {
  MatmulAlgorithmTable table;
  table.set(sample_record());
  const std::string good = table.to_text();
  const std::string line = good.substr(good.rfind('\n', good.size() - 2) + 1);
  EXPECT_EQ(parse_error(good), "");
  EXPECT_EQ(parse_error("\n# a comment\n\n" + line), "");

  EXPECT_NE(parse_error("# header\nNVIDIA_H200 130100 1 0\n").find("table.tsv line 2: 4 fields, expected 31"),
            std::string::npos);

  std::string bad_integer = line;
  bad_integer.replace(bad_integer.find(" 2304 "), 6, " 23x4 ");
  EXPECT_NE(parse_error(bad_integer).find("line 1: column m is '23x4', not an integer"), std::string::npos);

  std::string negative = line;
  negative.replace(negative.find(" 16384 "), 7, " -16384 ");
  EXPECT_NE(parse_error(negative).find("column n is '-16384'"), std::string::npos);

  std::string short_words = line;
  const std::size_t words = short_words.find("0000000000000001:");
  short_words.replace(words, 17, "");  // seven words left
  EXPECT_NE(parse_error(short_words).find("column algorithm"), std::string::npos);

  std::string bad_time = line;
  bad_time.replace(bad_time.find("74.500"), 6, "fast");
  EXPECT_NE(parse_error(bad_time).find("column chosen_us is 'fast', not a time in us"), std::string::npos);

  EXPECT_NE(parse_error(line + line).find("line 2: the same GPU, cuBLASLt version and shape as line 1"),
            std::string::npos);
}

TEST(MatmulAlgorithms, WritesAtomicallyAndReadsTheFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("adamant-matmul-table-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "table.tsv";
  MatmulAlgorithmTable table;
  table.set(sample_record());
  table.write(path);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "table.tsv");  // no temporary file left behind
  }
  const MatmulAlgorithmTable read = MatmulAlgorithmTable::read(path);
  EXPECT_EQ(read.to_text(), table.to_text());
  EXPECT_EQ(read.source(), path.string());

  try {
    MatmulAlgorithmTable::read(dir / "missing.tsv");
    FAIL() << "a missing table was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.tsv: cannot read it"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("trainer.matmul_algorithms"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// The names the tuner prints for cuBLAS's data type values (cudaDataType_t: CUDA_R_32F 0,
// CUDA_R_16F 2, CUDA_R_16BF 14 in library_types.h).
TEST(MatmulAlgorithms, TypeNamesFollowCudaDataTypeValues) {
  EXPECT_STREQ(matmul_type_name(0), "fp32");
  EXPECT_STREQ(matmul_type_name(2), "fp16");
  EXPECT_STREQ(matmul_type_name(14), "bf16");
  EXPECT_STREQ(matmul_type_name(1), "?");
}

}  // namespace
}  // namespace adamant::kernels

// The datasheet peaks an MFU is measured against, by the names the driver reports, and what
// `adamant bench` reports with them (the progress line and records: metrics_log_test.cpp).
#include "adamant/train/gpu_peak.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "adamant/train/benchmark.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(GpuPeak, DatasheetFiguresByTheDriversNames) {
  const std::vector<std::pair<std::string, double>> known = {
      {"NVIDIA H200", 989e12},
      {"NVIDIA H200 NVL", 835e12},
      {"NVIDIA GH200 480GB", 989e12},
      {"NVIDIA H100 80GB HBM3", 989e12},
      {"NVIDIA H100 PCIe", 756e12},
      {"NVIDIA H100 NVL", 835e12},
      {"NVIDIA H800", 989e12},
      {"NVIDIA A100-SXM4-80GB", 312e12},
      {"NVIDIA A100-PCIE-40GB", 312e12},
      {"NVIDIA A100 80GB PCIe", 312e12},
      {"NVIDIA A10", 125e12},
      {"NVIDIA A30", 165e12},
      {"NVIDIA L40S", 362e12},
      {"NVIDIA L40", 181e12},
      {"NVIDIA L4", 121e12},
      {"NVIDIA B200", 2250e12},
      {"nvidia h100 pcie", 756e12},
  };
  for (const auto& [name, flops] : known) {
    const auto peak = datasheet_bf16_flops(name);
    ASSERT_TRUE(peak.has_value()) << name;
    EXPECT_DOUBLE_EQ(*peak, flops) << name;
  }
}

TEST(GpuPeak, WholeWordsOnlySoThatNoModelPassesForAnother) {
  // A10G is not the A10, an A1000 is no A100, a Tesla V100 is not in the table.
  for (const char* name : {"NVIDIA A10G", "NVIDIA RTX A1000", "Tesla V100-SXM2-32GB", "", "NVIDIA"}) {
    EXPECT_FALSE(datasheet_bf16_flops(name).has_value()) << name;
  }
}

TEST(GpuPeak, TheCpuReportsNoFlopsPerGpu) {
  const FlopsReference reference = flops_reference(Device::cpu());
  EXPECT_FALSE(reference.per_gpu);
  EXPECT_EQ(reference.peak_flops, 0.0);
}

BenchmarkResult gpu_bench(double peak_flops) {
  BenchmarkResult r;
  r.steps = 10;
  r.world_size = r.data_parallel_size = r.tensor_parallel_size = r.pipeline_parallel_size = 1;
  r.tokens_per_second = r.tokens_per_second_per_device = 150000;
  r.model_flops_per_token = 1e9;  // 150 TFLOP/s per GPU
  r.memory.gpu = true;
  r.gpu_name = "NVIDIA A100-SXM4-80GB";
  r.peak_flops = peak_flops;
  return r;
}

TEST(GpuPeak, BenchGivesTheMfuAgainstThePeakOrSaysWhyNot) {
  const BenchmarkResult a100 = gpu_bench(312e12);
  EXPECT_THAT(describe(a100), HasSubstr("model FLOPs 150 TFLOP/s per GPU"));
  EXPECT_THAT(describe(a100), HasSubstr("MFU 48.1% of 312 TFLOP/s (NVIDIA A100-SXM4-80GB)"));
  const auto json = nlohmann::json::parse(to_json(a100));
  EXPECT_DOUBLE_EQ(json.at("mfu").get<double>(), 150.0 / 312.0);
  EXPECT_DOUBLE_EQ(json.at("model_tflops_per_device").get<double>(), 150.0);

  const BenchmarkResult unknown = gpu_bench(0.0);
  EXPECT_THAT(describe(unknown), HasSubstr("no datasheet peak is known for NVIDIA A100-SXM4-80GB; give --peak-tflops"));
  EXPECT_THAT(describe(unknown), Not(HasSubstr("MFU ")));
  EXPECT_FALSE(nlohmann::json::parse(to_json(unknown)).contains("mfu"));
}

}  // namespace
}  // namespace adamant::train

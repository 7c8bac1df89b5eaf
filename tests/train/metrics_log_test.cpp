// metrics.jsonl: a resumed run replaces the records of the steps it runs again (and a torn
// last line) instead of repeating them, a full disk is an error naming the file, and a GPU
// run's steps carry its model FLOP/s and MFU (on the progress line too).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/train/metrics.h"
#include "support/test_data.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;

std::vector<nlohmann::json> records_of(const std::filesystem::path& file) {
  std::vector<nlohmann::json> records;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

StepMetrics step(std::int64_t n) {
  StepMetrics m;
  m.step = n;
  m.loss = 10.0 - static_cast<double>(n);
  return m;
}

TEST(MetricsLog, ResumeReplacesTheRecordsOfStepsRunAgain) {
  const testing::TempDir dir("metrics-log");
  const auto file = dir / "run" / "metrics.jsonl";
  {
    MetricsLog log(file, std::nullopt);
    for (int s = 1; s <= 7; ++s) log.step(step(s));
    log.validation(4, 3.5);
    log.validation(6, 3.25);
  }
  std::ofstream(file, std::ios::app) << "{\"type\": \"train\", \"st";  // torn by a kill
  {
    MetricsLog log(file, 4);  // resumed from the checkpoint of step 4
    for (int s = 5; s <= 8; ++s) log.step(step(s));
  }
  const auto records = records_of(file);
  std::vector<std::int64_t> train_steps;
  int resumes = 0;
  for (const auto& r : records) {
    if (r["type"] == "train") train_steps.push_back(r["step"].get<std::int64_t>());
    if (r["type"] == "resume") {
      ++resumes;
      EXPECT_EQ(r["step"], 4);
      EXPECT_THAT(r["detail"].get<std::string>(),
                  HasSubstr("5 record(s)"));  // steps 5, 6, 7, validation 6, the torn line
    }
    if (r["type"] == "validation") {
      EXPECT_EQ(r["step"], 4);
    }
  }
  EXPECT_EQ(train_steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(resumes, 1);

  // A fresh run (not resumed) starts the file afresh.
  { MetricsLog log(file, std::nullopt); }
  EXPECT_TRUE(records_of(file).empty());
}

StepMetrics gpu_step(double peak_flops) {
  StepMetrics m;
  m.step = 3;
  m.max_steps = 10;
  m.tokens_per_second = 400000;
  m.model_flops_per_gpu = 461.5e12;
  m.peak_flops_per_gpu = peak_flops;
  return m;
}

TEST(MetricsLog, ProgressLineShowsAGpuRunsMfuOrItsFlops) {
  EXPECT_THAT(format_progress(gpu_step(989e12), 10.0), HasSubstr("400000 tok/s | MFU 46.7% | comm"));
  EXPECT_THAT(format_progress(gpu_step(0.0), 10.0), HasSubstr("400000 tok/s | 462 TFLOP/s/GPU | comm"));
  StepMetrics cpu = gpu_step(0.0);
  cpu.model_flops_per_gpu = 0;
  EXPECT_THAT(format_progress(cpu, 10.0), HasSubstr("400000 tok/s | comm"));
}

TEST(MetricsLog, GpuRecordsCarryTheFlopsTheMfuAndThePeak) {
  const testing::TempDir dir("gpu-peak");
  const auto file = dir / "metrics.jsonl";
  {
    MetricsLog log(file, std::nullopt);
    log.step(gpu_step(989e12));
    log.step(gpu_step(0.0));
    RunMetrics run;
    run.memory.gpu = true;
    run.gpu_name = "NVIDIA H200";
    run.peak_flops_per_gpu = 989e12;
    log.run_summary(run);
  }
  const auto records = records_of(file);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_DOUBLE_EQ(records[0].at("model_tflops_per_gpu").get<double>(), 461.5);
  EXPECT_DOUBLE_EQ(records[0].at("mfu").get<double>(), 461.5 / 989.0);
  EXPECT_DOUBLE_EQ(records[1].at("model_tflops_per_gpu").get<double>(), 461.5);
  EXPECT_FALSE(records[1].contains("mfu"));  // no peak known: no MFU
  EXPECT_EQ(records[2].at("gpu_name").get<std::string>(), "NVIDIA H200");
  EXPECT_DOUBLE_EQ(records[2].at("peak_flops_per_gpu").get<double>(), 989e12);
}

TEST(MetricsLog, AFullDiskIsAnErrorNamingTheFile) {
  MetricsLog log("/dev/full", std::nullopt);
  try {
    log.step(step(1));
    FAIL() << "writing to /dev/full must fail";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("/dev/full"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("No space left on device"));
  }
}

}  // namespace
}  // namespace adamant::train

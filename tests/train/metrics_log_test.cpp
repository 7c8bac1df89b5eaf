// metrics.jsonl: a resumed run replaces the records of the steps it runs again (and a torn
// last line) instead of repeating them, and a full disk is an error naming the file.
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

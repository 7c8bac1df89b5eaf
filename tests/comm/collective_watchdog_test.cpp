// The watchdog's verdicts with a timeout action that records instead of ending the process.
#include "adamant/comm/collective_watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace adamant::comm {
namespace {

using std::chrono::milliseconds;

class Reports {
 public:
  CollectiveWatchdog::TimeoutAction action() {
    return [this](const std::string& report) {
      const std::lock_guard lock(mutex_);
      reports_.push_back(report);
    };
  }
  std::vector<std::string> take() {
    const std::lock_guard lock(mutex_);
    return reports_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> reports_;
};

TEST(CollectiveWatchdog, AWaitPastTheTimeoutIsReportedWithRankHostCollectiveAndGroup) {
  Reports reports;
  {
    CollectiveWatchdog dog(milliseconds(50), 5, "node-b", reports.action());
    const CollectiveWatch watch(&dog, "all_reduce", "data-parallel");
    std::this_thread::sleep_for(milliseconds(400));
  }
  const auto seen = reports.take();
  ASSERT_EQ(seen.size(), 1u);
  for (const char* part :
       {"rank 5 on host node-b", "for all_reduce over the data-parallel group", "trainer.collective_timeout_s"}) {
    EXPECT_NE(seen[0].find(part), std::string::npos) << part << " missing from: " << seen[0];
  }
}

TEST(CollectiveWatchdog, WaitsShorterThanTheTimeoutAndIdleTimePass) {
  Reports reports;
  {
    CollectiveWatchdog dog(milliseconds(300), 0, "node-a", reports.action());
    for (int i = 0; i < 20; ++i) {
      const CollectiveWatch watch(&dog, "barrier", "world");
      std::this_thread::sleep_for(milliseconds(5));
    }
    std::this_thread::sleep_for(milliseconds(600));  // idle: no wait in progress
  }
  EXPECT_TRUE(reports.take().empty());
}

}  // namespace
}  // namespace adamant::comm

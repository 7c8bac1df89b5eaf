#pragma once
// Ends a job whose collective waits past a timeout (a rank died, stalls or lost its
// network) instead of leaving every other rank hanging: a thread of its own looks at the
// wait in progress a few times per timeout and, once one runs too long, reports which
// rank on which host waited for which collective over which group, then calls the
// timeout action (by default MPI_Abort on MPI_COMM_WORLD, which ends every rank).
// Starting and ending a watch is one clock read and a few atomic stores: no allocation,
// no lock, cheap enough for every collective of a step.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace adamant::comm {

class CollectiveWatchdog {
 public:
  // Receives the report; must end the process (or the test that made the watchdog).
  using TimeoutAction = std::function<void(const std::string& report)>;

  // `timeout` > 0. `rank` and `host` name this process in the report.
  CollectiveWatchdog(std::chrono::milliseconds timeout, int rank, std::string host,
                     TimeoutAction on_timeout = abort_job);
  ~CollectiveWatchdog();  // stops and joins the thread
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  std::chrono::milliseconds timeout() const { return timeout_; }
  // Prints the report to stderr and calls MPI_Abort(MPI_COMM_WORLD, 3).
  static void abort_job(const std::string& report);

 private:
  friend class CollectiveWatch;
  void start_watch(const char* operation, const char* group) noexcept;
  void end_watch() noexcept;
  void run();
  std::string report(std::chrono::nanoseconds waited) const;

  const std::chrono::milliseconds timeout_;
  const int rank_;
  const std::string host_;
  const TimeoutAction on_timeout_;
  // Start of the wait in progress in steady-clock nanoseconds; 0 when none.
  std::atomic<std::int64_t> started_ns_{0};
  std::atomic<const char*> operation_{""};
  std::atomic<const char*> group_{""};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;     // last: starts once everything above exists
};

// One wait under watch, for its scope: at most one at a time per watchdog (only one
// thread calls MPI). `operation` and `group` are string literals. A null watchdog
// watches nothing.
class CollectiveWatch {
 public:
  CollectiveWatch(CollectiveWatchdog* watchdog, const char* operation, const char* group) noexcept
      : watchdog_(watchdog) {
    if (watchdog_ != nullptr) watchdog_->start_watch(operation, group);
  }
  ~CollectiveWatch() {
    if (watchdog_ != nullptr) watchdog_->end_watch();
  }
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;

 private:
  CollectiveWatchdog* watchdog_;
};

}  // namespace adamant::comm

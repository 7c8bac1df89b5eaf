#include "adamant/comm/collective_watchdog.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "adamant/core/error.h"

namespace adamant::comm {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CollectiveWatchdog::CollectiveWatchdog(std::chrono::milliseconds timeout, int rank, std::string host,
                                       TimeoutAction on_timeout)
    : timeout_(timeout), rank_(rank), host_(std::move(host)), on_timeout_(std::move(on_timeout)) {
  ADAMANT_CHECK(timeout_.count() > 0, "CollectiveWatchdog: the timeout must be positive (got {} ms)", timeout_.count());
  thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CollectiveWatchdog::start_watch(const char* operation, const char* group) noexcept {
  operation_.store(operation, std::memory_order_relaxed);
  group_.store(group, std::memory_order_relaxed);
  started_ns_.store(now_ns(), std::memory_order_release);
}

void CollectiveWatchdog::end_watch() noexcept { started_ns_.store(0, std::memory_order_release); }

std::string CollectiveWatchdog::report(std::chrono::nanoseconds waited) const {
  return fmt::format(
      "rank {} on host {} has waited {:.1f} s for {} over the {} group, longer than the collective timeout of "
      "{:.1f} s (trainer.collective_timeout_s): another rank of the group has died, stalls or cannot be reached. "
      "Ending the job.",
      rank_, host_, std::chrono::duration<double>(waited).count(), operation_.load(std::memory_order_relaxed),
      group_.load(std::memory_order_relaxed), std::chrono::duration<double>(timeout_).count());
}

void CollectiveWatchdog::run() {
  // Looks ten times per timeout, so a wait is caught at most 10% late (but sleeps 1 s at most
  // between looks, and 10 ms at least).
  const auto period = std::clamp<std::chrono::milliseconds>(timeout_ / 10, std::chrono::milliseconds(10),
                                                            std::chrono::milliseconds(1000));
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const std::int64_t started = started_ns_.load(std::memory_order_acquire);
    if (started == 0) continue;
    const std::chrono::nanoseconds waited(now_ns() - started);
    if (waited < timeout_) continue;
    const std::string text = report(waited);
    lock.unlock();
    on_timeout_(text);
    return;  // one report per watchdog
  }
}

void CollectiveWatchdog::abort_job(const std::string& report) {
  std::fprintf(stderr, "adamant: error: %s\n", report.c_str());
  std::fflush(stderr);
  // Only this thread calls MPI now: the waiting thread is stuck inside its collective.
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);  // MPI_Abort does not return; should a broken MPI return, still end this rank
}

}  // namespace adamant::comm

#pragma once
// Progress of a long data job on a terminal stream: one line rewritten in place
// when the stream is a TTY, a plain line every few seconds otherwise (logs, CI).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace adamant::data {

class ProgressMeter {
 public:
  // `stream` null disables the meter; `total_bytes` (0 if unknown) gives the ETA.
  ProgressMeter(std::FILE* stream, std::int64_t total_bytes);

  void update(std::int64_t documents, std::int64_t bytes);
  void finish(std::int64_t documents, std::int64_t bytes, std::int64_t tokens);

  // "12,345 docs | 10.5/50.0 MB (21.0%) | 3.2 MB/s | ETA 12s" for the given counts.
  static std::string format(std::int64_t documents, std::int64_t bytes, std::int64_t total_bytes, double seconds);

 private:
  double elapsed_seconds() const;
  std::FILE* stream_;
  std::int64_t total_bytes_;
  bool is_terminal_ = false;
  std::chrono::steady_clock::time_point start_;
  double last_report_ = 0.0;
};

}  // namespace adamant::data

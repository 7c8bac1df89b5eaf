#include "adamant/data/progress_meter.h"

#include <fmt/format.h>
#include <unistd.h>

namespace adamant::data {
namespace {

// Redraws cost little on a terminal; a log file wants few lines.
constexpr double kTerminalInterval = 0.25;
constexpr double kLogInterval = 10.0;

std::string with_thousands(std::int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string grouped = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) grouped.push_back(',');
    grouped.push_back(digits[i]);
  }
  return grouped;
}

std::string duration(double seconds) {
  const auto total = static_cast<std::int64_t>(seconds + 0.5);
  if (total < 60) return fmt::format("{}s", total);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
}

}  // namespace

ProgressMeter::ProgressMeter(std::FILE* stream, std::int64_t total_bytes)
    : stream_(stream), total_bytes_(total_bytes), start_(std::chrono::steady_clock::now()) {
  if (stream_ != nullptr) is_terminal_ = ::isatty(::fileno(stream_)) != 0;
}

double ProgressMeter::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string ProgressMeter::format(std::int64_t documents, std::int64_t bytes, std::int64_t total_bytes,
                                  double seconds) {
  constexpr double kMB = 1e6;
  const double rate = seconds > 0.0 ? static_cast<double>(bytes) / kMB / seconds : 0.0;
  std::string line = fmt::format("{} docs | ", with_thousands(documents));
  if (total_bytes > 0) {
    const double fraction = static_cast<double>(bytes) / static_cast<double>(total_bytes);
    line += fmt::format("{:.1f}/{:.1f} MB ({:.1f}%) | {:.1f} MB/s", static_cast<double>(bytes) / kMB,
                        static_cast<double>(total_bytes) / kMB, 100.0 * fraction, rate);
    if (rate > 0.0 && bytes < total_bytes) {
      line += " | ETA " + duration(static_cast<double>(total_bytes - bytes) / kMB / rate);
    }
  } else {
    line += fmt::format("{:.1f} MB | {:.1f} MB/s", static_cast<double>(bytes) / kMB, rate);
  }
  return line;
}

void ProgressMeter::update(std::int64_t documents, std::int64_t bytes) {
  if (stream_ == nullptr) return;
  const double now = elapsed_seconds();
  if (now - last_report_ < (is_terminal_ ? kTerminalInterval : kLogInterval)) return;
  last_report_ = now;
  const std::string line = format(documents, bytes, total_bytes_, now);
  if (is_terminal_) {
    std::fprintf(stream_, "\r\x1b[Kpreprocess: %s", line.c_str());
  } else {
    std::fprintf(stream_, "preprocess: %s\n", line.c_str());
  }
  std::fflush(stream_);
}

void ProgressMeter::finish(std::int64_t documents, std::int64_t bytes, std::int64_t tokens) {
  if (stream_ == nullptr) return;
  const double seconds = elapsed_seconds();
  const std::string line = format(documents, bytes, total_bytes_, seconds);
  std::fprintf(stream_, "%spreprocess: %s | %s tokens in %s\n", is_terminal_ ? "\r\x1b[K" : "", line.c_str(),
               with_thousands(tokens).c_str(), duration(seconds).c_str());
  std::fflush(stream_);
}

}  // namespace adamant::data

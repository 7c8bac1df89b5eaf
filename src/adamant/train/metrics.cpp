#include "adamant/train/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "adamant/core/error.h"

namespace adamant::train {

MetricsLog::MetricsLog(const std::filesystem::path& file, bool append) {
  std::filesystem::create_directories(file.parent_path());
  out_.open(file, append ? std::ios::app : std::ios::trunc);
  ADAMANT_CHECK(out_.good(), "cannot open the metrics file {} for writing", file.string());
}

void MetricsLog::step(const StepMetrics& m) {
  nlohmann::json j{{"type", "train"},
                   {"step", m.step},
                   {"loss", m.loss},
                   {"lr", m.lr},
                   {"grad_norm", m.grad_norm},
                   {"loss_scale", m.loss_scale},
                   {"skipped", m.skipped},
                   {"tokens_per_s", m.tokens_per_second},
                   {"step_s", m.step_seconds},
                   {"consumed_samples", m.consumed_samples},
                   {"exposed_comm_ms", m.exposed_comm_ms}};
  out_ << j.dump() << '\n';
  out_.flush();
}

void MetricsLog::validation(std::int64_t step, double val_loss) {
  out_ << nlohmann::json{{"type", "validation"}, {"step", step}, {"val_loss", val_loss}}.dump() << '\n';
  out_.flush();
}

void MetricsLog::run_summary(const RunMetrics& m) {
  nlohmann::json j{{"type", "summary"},
                   {"steps", m.steps},
                   {"tokens_per_s", m.tokens_per_second},
                   {"exposed_comm_ms", m.mean_exposed_comm_ms},
                   {"world_size", m.world_size},
                   {"data_parallel_size", m.data_parallel_size},
                   {"tensor_parallel_size", m.tensor_parallel_size},
                   {"peak_allocated_bytes_max", m.memory.allocated_peak.max},
                   {"peak_allocated_bytes_min", m.memory.allocated_peak.min}};
  if (m.memory.gpu) {
    j["peak_device_in_use_bytes_max"] = m.memory.device_in_use_peak.max;
    j["peak_device_in_use_bytes_min"] = m.memory.device_in_use_peak.min;
  }
  out_ << j.dump() << '\n';
  out_.flush();
}

void MetricsLog::event(const std::string& name, std::int64_t step, const std::string& detail) {
  out_ << nlohmann::json{{"type", name}, {"step", step}, {"detail", detail}}.dump() << '\n';
  out_.flush();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_progress(const StepMetrics& m, double eta_seconds) {
  return fmt::format(
      "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f}{} | {:.0f} tok/s | comm {:.1f} ms | ETA {}", m.step,
      std::to_string(m.max_steps).size(), m.max_steps, m.loss, m.lr, m.grad_norm,
      m.skipped ? fmt::format(" | skipped (loss scale {:g})", m.loss_scale) : std::string(), m.tokens_per_second,
      m.exposed_comm_ms, format_duration(eta_seconds));
}

}  // namespace adamant::train

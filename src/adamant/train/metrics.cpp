#include "adamant/train/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "adamant/core/atomic_file.h"
#include "adamant/core/error.h"

namespace adamant::train {

namespace {

// Keeps the records of steps up to `step` (and those without a step); returns how many were dropped.
std::int64_t keep_records_up_to(const std::filesystem::path& file, std::int64_t step) {
  std::ifstream in(file);
  if (!in) return 0;
  std::string kept, line;
  std::int64_t dropped = 0;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    const bool whole = !record.is_discarded() && record.is_object();
    if (!whole ||
        (record.contains("step") && record["step"].is_number_integer() && record["step"].get<std::int64_t>() > step)) {
      dropped += 1;
      continue;
    }
    kept += line + '\n';
  }
  if (dropped > 0) write_file_atomically(file, kept);
  return dropped;
}

// Readies the file for a run: its folder exists; for a resumed run, later records are gone.
std::int64_t prepare_metrics_file(const std::filesystem::path& file, std::optional<std::int64_t> resumed_at_step) {
  create_folder(file.parent_path(), "run");
  return resumed_at_step ? keep_records_up_to(file, *resumed_at_step) : 0;
}

}  // namespace

MetricsLog::MetricsLog(const std::filesystem::path& file, std::optional<std::int64_t> resumed_at_step)
    : removed_records_(prepare_metrics_file(file, resumed_at_step)), out_(file, !resumed_at_step.has_value()) {
  if (resumed_at_step) {
    event("resume", *resumed_at_step,
          fmt::format("{} record(s) of later steps, written before the run was interrupted, were removed: those "
                      "steps run again",
                      removed_records_));
  }
}

void MetricsLog::write(const std::string& line) { out_.write(line + '\n'); }

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
  if (m.model_flops_per_gpu > 0) j["model_tflops_per_gpu"] = m.model_flops_per_gpu / 1e12;
  if (const auto mfu = m.mfu()) j["mfu"] = *mfu;
  write(j.dump());
}

void MetricsLog::validation(std::int64_t step, double val_loss) {
  write(nlohmann::json{{"type", "validation"}, {"step", step}, {"val_loss", val_loss}}.dump());
}

void MetricsLog::run_summary(const RunMetrics& m) {
  nlohmann::json j{{"type", "summary"},
                   {"steps", m.steps},
                   {"tokens_per_s", m.tokens_per_second},
                   {"exposed_comm_ms", m.mean_exposed_comm_ms},
                   {"world_size", m.world_size},
                   {"data_parallel_size", m.data_parallel_size},
                   {"tensor_parallel_size", m.tensor_parallel_size},
                   {"pipeline_parallel_size", m.pipeline_parallel_size},
                   {"peak_allocated_bytes_max", m.memory.allocated_peak.max},
                   {"peak_allocated_bytes_min", m.memory.allocated_peak.min},
                   {"model_flops_per_token", m.model_flops_per_token}};
  if (m.memory.gpu) {
    j["peak_device_in_use_bytes_max"] = m.memory.device_in_use_peak.max;
    j["peak_device_in_use_bytes_min"] = m.memory.device_in_use_peak.min;
    j["gpu_name"] = m.gpu_name;
    if (m.peak_flops_per_gpu > 0) j["peak_flops_per_gpu"] = m.peak_flops_per_gpu;
  }
  write(j.dump());
}

void MetricsLog::event(const std::string& name, std::int64_t step, const std::string& detail) {
  write(nlohmann::json{{"type", name}, {"step", step}, {"detail", detail}}.dump());
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_progress(const StepMetrics& m, double eta_seconds) {
  // GPU runs: the model FLOPs utilisation where the GPU's peak is known, else the FLOP/s themselves.
  std::string flops;
  if (const auto mfu = m.mfu()) {
    flops = fmt::format(" | MFU {:.1f}%", 100.0 * *mfu);
  } else if (m.model_flops_per_gpu > 0) {
    flops = fmt::format(" | {:.0f} TFLOP/s/GPU", m.model_flops_per_gpu / 1e12);
  }
  return fmt::format(
      "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f}{} | {:.0f} tok/s{} | comm {:.1f} ms | ETA {}",
      m.step, std::to_string(m.max_steps).size(), m.max_steps, m.loss, m.lr, m.grad_norm,
      m.skipped ? fmt::format(" | skipped (loss scale {:g})", m.loss_scale) : std::string(), m.tokens_per_second, flops,
      m.exposed_comm_ms, format_duration(eta_seconds));
}

}  // namespace adamant::train

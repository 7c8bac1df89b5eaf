#pragma once
// TensorBoard event files in the run folder, as NeMo's exp_manager leaves them: one file
// events.out.tfevents.<seconds>.<host>.<pid>.adamant per run call, holding scalar
// summaries (tag, step, value). TensorBoard shows every file of a folder as one run, so a
// resumed run's file continues the same curves; it starts with a session-start event at the
// resumed step, after which TensorBoard drops the older files' points from that step on
// (those of steps run again after the last checkpoint).
//
// The file format: records of (uint64 length, masked CRC32C of the length, the bytes of
// an Event protocol buffer, masked CRC32C of them), all little-endian. The few protocol
// buffer fields needed (Event: wall_time 1, step 2, file_version 3, summary 5, session_log 7;
// Summary: value 1; Summary.Value: tag 1, simple_value 2; SessionLog: status 1) are encoded
// here. Every write is flushed and checked.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "adamant/core/file_write.h"
#include "adamant/train/memory_report.h"
#include "adamant/train/metrics.h"

namespace adamant::train {

class TensorBoardWriter {
 public:
  // Creates a new event file in `folder`. resumed_step > 0: the run continues from that step.
  // A fresh run (resumed_step 0) first deletes the folder's older event files, as the metrics
  // log starts afresh.
  TensorBoardWriter(const std::filesystem::path& folder, std::int64_t resumed_step);
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void scalar(std::string_view tag, std::int64_t step, double value);
  const std::filesystem::path& file() const { return file_; }

 private:
  void write_event(std::int64_t step, const std::string& payload);  // payload: the Event's "what" field
  void write_record(const std::string& data);

  std::filesystem::path file_;
  std::unique_ptr<AppendFile> out_;  // opened once the file name is chosen
};

// A training step's scalars under NeMo's tags where NeMo has one: reduced_train_loss, lr, grad_norm,
// loss_scale, train_step_timing (seconds), consumed_samples; and tokens_per_sec, exposed_comm_ms, and on GPUs
// model_tflops_per_gpu and mfu (where the GPU's peak is known).
void write_step_scalars(TensorBoardWriter& writer, const StepMetrics& m);
// The run's memory high-water marks in bytes: peak_allocated_bytes_max/min (over the ranks) and, on a
// GPU, peak_device_in_use_bytes_max/min.
void write_memory_scalars(TensorBoardWriter& writer, std::int64_t step, const MemoryReport& memory);

// Masked CRC32C of a TFRecord: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t tfrecord_masked_crc(const void* data, std::size_t bytes);

}  // namespace adamant::train

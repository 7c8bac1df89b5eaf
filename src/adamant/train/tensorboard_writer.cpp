#include "adamant/train/tensorboard_writer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "adamant/core/crc32c.h"

namespace adamant::train {

namespace {

constexpr std::string_view kFilePrefix = "events.out.tfevents.";

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

template <typename T>
void put_fixed(std::string& out, T value) {  // little-endian, as the format and x86/ARM hosts are
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

constexpr int kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5;

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, kLength);
  put_varint(out, bytes.size());
  out.append(bytes);
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

std::uint32_t tfrecord_masked_crc(const void* data, std::size_t bytes) {
  const std::uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& folder, std::int64_t resumed_step) {
  std::filesystem::create_directories(folder);
  if (resumed_step == 0) {
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.path().filename().string().starts_with(kFilePrefix)) std::filesystem::remove(entry.path());
    }
  }
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Two sessions of one process can start within a second (a test, or a resume right after a
  // run): a counter keeps the earlier file from being overwritten.
  const std::string stem =
      std::string(kFilePrefix) + std::to_string(seconds) + "." + host_name() + "." + std::to_string(getpid());
  file_ = folder / (stem + ".adamant");
  for (int counter = 1; std::filesystem::exists(file_); ++counter) {
    file_ = folder / (stem + "." + std::to_string(counter) + ".adamant");
  }
  out_ = std::make_unique<AppendFile>(file_, /*truncate=*/true);
  std::string version;
  put_bytes(version, 3, "brain.Event:2");
  write_event(0, version);
  if (resumed_step > 0) {
    std::string session_log, start;
    put_tag(start, 1, kVarint);
    put_varint(start, 1);  // SessionLog.START
    put_bytes(session_log, 7, start);
    write_event(resumed_step, session_log);
  }
}

void TensorBoardWriter::scalar(std::string_view tag, std::int64_t step, double value) {
  std::string summary_value, summary, what;
  put_bytes(summary_value, 1, tag);
  put_tag(summary_value, 2, kFixed32);
  put_fixed(summary_value, static_cast<float>(value));
  put_bytes(summary, 1, summary_value);
  put_bytes(what, 5, summary);
  write_event(step, what);
}

void TensorBoardWriter::write_event(std::int64_t step, const std::string& payload) {
  const double wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string event;
  put_tag(event, 1, kFixed64);
  put_fixed(event, wall_time);
  put_tag(event, 2, kVarint);
  put_varint(event, static_cast<std::uint64_t>(step));
  event += payload;
  write_record(event);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string record;
  const std::uint64_t length = data.size();
  put_fixed(record, length);
  put_fixed(record, tfrecord_masked_crc(record.data(), sizeof(length)));
  record += data;
  put_fixed(record, tfrecord_masked_crc(data.data(), data.size()));
  out_->write(record);
}

void write_step_scalars(TensorBoardWriter& writer, const StepMetrics& m) {
  writer.scalar("reduced_train_loss", m.step, m.loss);
  writer.scalar("lr", m.step, m.lr);
  writer.scalar("grad_norm", m.step, m.grad_norm);
  writer.scalar("loss_scale", m.step, m.loss_scale);
  writer.scalar("train_step_timing", m.step, m.step_seconds);
  writer.scalar("consumed_samples", m.step, static_cast<double>(m.consumed_samples));
  writer.scalar("tokens_per_sec", m.step, m.tokens_per_second);
  writer.scalar("exposed_comm_ms", m.step, m.exposed_comm_ms);
  if (m.model_flops_per_gpu > 0) writer.scalar("model_tflops_per_gpu", m.step, m.model_flops_per_gpu / 1e12);
  if (const auto mfu = m.mfu()) writer.scalar("mfu", m.step, *mfu);
}

void write_memory_scalars(TensorBoardWriter& writer, std::int64_t step, const MemoryReport& memory) {
  writer.scalar("peak_allocated_bytes_max", step, memory.allocated_peak.max);
  writer.scalar("peak_allocated_bytes_min", step, memory.allocated_peak.min);
  if (memory.gpu) {
    writer.scalar("peak_device_in_use_bytes_max", step, memory.device_in_use_peak.max);
    writer.scalar("peak_device_in_use_bytes_min", step, memory.device_in_use_peak.min);
  }
}

}  // namespace adamant::train

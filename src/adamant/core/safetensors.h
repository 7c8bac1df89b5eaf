#pragma once
// The safetensors format (Hugging Face's tensor file):
//   u64 little-endian N | N bytes of JSON header | raw little-endian tensor data.
// The header maps each tensor name to {"dtype": "F32"|"BF16"|..., "shape": [...],
// "data_offsets": [begin, end]} (byte offsets into the data that follows the header), plus an
// optional "__metadata__" object of string values. Adamant writes the header padded with
// spaces to a multiple of 8 bytes and the tensors contiguously in the order they were added, so
// the same tensors always give the same bytes. The reader checks every size and offset: a
// truncated file, a bad header, a tensor outside the data or overlapping another throws
// adamant::Error naming the file and the tensor or field.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "adamant/core/dtype.h"
#include "adamant/core/file_read.h"

namespace adamant {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section
  std::uint64_t end = 0;

  std::size_t numel() const;
};

// The format's dtype names: F64, F32, BF16, F16, I64, I32, U16, U8.
std::string safetensors_dtype_name(DType dtype);

class SafetensorsWriter {
 public:
  // Host memory; `data` must stay valid until write(). Names are unique and not "__metadata__".
  void add(const std::string& name, const void* data, DType dtype, std::vector<std::int64_t> shape);
  std::map<std::string, std::string>& metadata() { return metadata_; }
  // Writes the file atomically (temporary name, flush, rename).
  void write(const std::filesystem::path& path) const;

 private:
  struct Pending {
    SafetensorsEntry entry;
    const void* data = nullptr;
  };
  std::vector<Pending> tensors_;
  std::uint64_t data_bytes_ = 0;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsReader {
 public:
  // Reads and validates the header; throws adamant::Error naming the file and the problem.
  explicit SafetensorsReader(std::filesystem::path path);
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in data order
  const SafetensorsEntry* find(const std::string& name) const;
  // Throws naming the file and the missing tensor.
  const SafetensorsEntry& entry(const std::string& name) const;
  // The tensor's raw little-endian bytes.
  std::vector<std::uint8_t> read(const std::string& name) const;

 private:
  std::filesystem::path path_;
  ReadOnlyFile file_;
  std::uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace adamant

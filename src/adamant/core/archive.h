#pragma once
// A checksummed file of named tensors plus JSON metadata: the container of every
// checkpoint file. Writes go to a temporary name, are flushed to disk and renamed
// into place, so a crash never leaves a half-written file under the real name.
//
// Layout: "ADMARCH1" | tensor blobs (64-byte aligned) | header JSON |
//         u64 header bytes | u32 CRC32C of header | "ADMAREND"
// The header lists each tensor's name, dtype, shape, offset, size and CRC32C.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "adamant/core/atomic_file.h"
#include "adamant/core/crc32c.h"
#include "adamant/core/dtype.h"
#include "adamant/core/file_read.h"

namespace adamant {

struct ArchiveEntry {
  std::string name;
  DType dtype = DType::u8;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
};

class ArchiveWriter {
 public:
  explicit ArchiveWriter(std::filesystem::path path);
  // Without commit(), the temporary file is removed.
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;

  // Host memory only. Names are unique.
  void add(const std::string& name, const void* data, DType dtype, std::vector<std::int64_t> shape);
  nlohmann::json& meta() { return meta_; }
  // Writes the header, flushes, renames to the final path and syncs the folder.
  void commit();

 private:
  AtomicFileWriter file_;
  std::vector<ArchiveEntry> entries_;
  nlohmann::json meta_ = nlohmann::json::object();
  bool committed_ = false;
};

class ArchiveReader {
 public:
  // Validates the framing and the header checksum; throws adamant::Error naming the file.
  explicit ArchiveReader(std::filesystem::path path);
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const nlohmann::json& meta() const { return meta_; }
  const std::vector<ArchiveEntry>& entries() const { return entries_; }
  bool has(const std::string& name) const;
  const ArchiveEntry& entry(const std::string& name) const;  // throws naming the file and tensor
  // Reads a whole tensor into dst (bytes must equal the stored size) and checks its CRC32C.
  void read(const std::string& name, void* dst, std::size_t bytes) const;
  std::vector<std::uint8_t> read_all(const std::string& name) const;

 private:
  std::filesystem::path path_;
  ReadOnlyFile file_;
  nlohmann::json meta_;
  std::vector<ArchiveEntry> entries_;
};

}  // namespace adamant

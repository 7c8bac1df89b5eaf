#pragma once
// A file written under a temporary name (path + ".tmp.<pid>") and renamed into place by
// commit() after a flush to disk, so a crash never leaves a half-written file under the real
// name. Without commit() the destructor removes the temporary file. Every write is checked
// (file_write.h): a full disk is an error naming the file.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace adamant {

class AtomicFileWriter {
 public:
  // `what` names the kind of file in error messages ("checkpoint file", "safetensors file").
  AtomicFileWriter(std::filesystem::path path, std::string_view what);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, std::size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  std::uint64_t position() const { return position_; }
  const std::filesystem::path& path() const { return path_; }
  // Syncs the file to disk, renames it to the final path and syncs the folder.
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  std::string what_;
  int fd_ = -1;
  std::uint64_t position_ = 0;
  bool committed_ = false;
};

// The whole text written atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view text, std::string_view what = "file");

}  // namespace adamant

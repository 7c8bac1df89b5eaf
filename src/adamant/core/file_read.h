#pragma once
// Files opened for reading. A reader that validates a file in its constructor may throw
// halfway through; the descriptor is owned here so it is closed on that path too.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace adamant {

// A regular file opened read-only, read at explicit offsets (pread), so const readers
// share it without a file position.
class ReadOnlyFile {
 public:
  // Throws adamant::Error naming `what` and the file when it is missing, unreadable or not a
  // regular file (a folder, a device).
  ReadOnlyFile(const std::filesystem::path& file, std::string_view what);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  std::uint64_t size() const { return size_; }
  // True when all `bytes` starting at `offset` were read into dst; false past the end or on
  // an I/O error (the caller words the error: it knows what the bytes were).
  bool read_at(std::uint64_t offset, void* dst, std::size_t bytes) const;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The whole file as text. Throws adamant::Error naming `what` and the file when it cannot be
// opened or read (ReadOnlyFile's checks).
std::string read_text_file(const std::filesystem::path& file, std::string_view what);

}  // namespace adamant

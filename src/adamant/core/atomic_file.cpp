#include "adamant/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "adamant/core/error.h"

namespace adamant {

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path, std::string_view what)
    : path_(std::move(path)), what_(what) {
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
  temp_path_ = path_;
  temp_path_ += ".tmp." + std::to_string(::getpid());
  file_ = std::fopen(temp_path_.c_str(), "wb");
  ADAMANT_CHECK(file_ != nullptr, "cannot create {} {}: {}", what_, temp_path_.string(), std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_) {
    std::error_code ignored;
    std::filesystem::remove(temp_path_, ignored);
  }
}

void AtomicFileWriter::write(const void* data, std::size_t bytes) {
  ADAMANT_CHECK(!committed_, "{} {}: write after commit", what_, path_.string());
  if (bytes != 0 && std::fwrite(data, 1, bytes, file_) != bytes) {
    fail("writing {} {} failed ({}); is the disk full?", what_, temp_path_.string(), std::strerror(errno));
  }
  position_ += bytes;
}

void AtomicFileWriter::commit() {
  ADAMANT_CHECK(!committed_, "{} {}: committed twice", what_, path_.string());
  ADAMANT_CHECK(std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0, "flushing {} {} failed: {}", what_,
                temp_path_.string(), std::strerror(errno));
  std::fclose(file_);
  file_ = nullptr;
  std::error_code error;
  std::filesystem::rename(temp_path_, path_, error);
  ADAMANT_CHECK(!error, "renaming {} to {} failed: {}", temp_path_.string(), path_.string(), error.message());
  committed_ = true;
  const auto folder = path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".");
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text, std::string_view what) {
  AtomicFileWriter file(path, what);
  file.write(text);
  file.commit();
}

}  // namespace adamant

#include "adamant/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "adamant/core/error.h"
#include "adamant/core/file_write.h"

namespace adamant {

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path, std::string_view what)
    : path_(std::move(path)), what_(what) {
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
  temp_path_ = path_;
  temp_path_ += ".tmp." + std::to_string(::getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ADAMANT_CHECK(fd_ >= 0, "cannot create {} {}: {}", what_, temp_path_.string(), std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    std::error_code ignored;
    std::filesystem::remove(temp_path_, ignored);
  }
}

void AtomicFileWriter::write(const void* data, std::size_t bytes) {
  ADAMANT_CHECK(!committed_, "{} {}: write after commit", what_, path_.string());
  write_checked(fd_, data, bytes, what_, path_);
  position_ += bytes;
}

void AtomicFileWriter::commit() {
  ADAMANT_CHECK(!committed_, "{} {}: committed twice", what_, path_.string());
  // A full disk may only show when the data is synced, or when the file is closed (NFS).
  const bool synced = ::fsync(fd_) == 0;
  const int sync_error = errno;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed) fail_writing(what_, path_, synced ? errno : sync_error);
  rename_into_place(temp_path_, path_);
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

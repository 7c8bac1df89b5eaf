#include "adamant/core/file_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "adamant/core/error.h"

namespace adamant {

void fail_writing(std::string_view what, const std::filesystem::path& file, int error) {
  fail("writing {} {} failed: {}{}", what, file.string(), std::strerror(error),
       error == ENOSPC || error == EFBIG ? " (free space on that disk, or write to another folder)" : "");
}

void write_checked(int fd, const void* data, std::size_t bytes, std::string_view what,
                   const std::filesystem::path& file) {
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, next, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_writing(what, file, n < 0 ? errno : EIO);
    next += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void rename_into_place(const std::filesystem::path& temp, const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::rename(temp, file, ec);
  if (ec) {
    ::unlink(temp.c_str());
    fail("cannot rename {} to {}: {}", temp.string(), file.string(), ec.message());
  }
}

AppendFile::AppendFile(std::filesystem::path file, bool truncate) : file_(std::move(file)) {
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  ADAMANT_CHECK(fd_ >= 0, "cannot open {} for writing: {}", file_.string(), std::strerror(errno));
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::write(std::string_view text) { write_checked(fd_, text.data(), text.size(), "file", file_); }

void create_folder(const std::filesystem::path& folder, std::string_view what) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    fail("cannot create the {} folder {}: {}; choose a writable location that is not under a file", what,
         folder.string(), ec.message());
  }
}

}  // namespace adamant

#include "adamant/core/file_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "adamant/core/error.h"

namespace adamant {

namespace {

// write() until every byte is written; false (errno set) on failure.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

[[noreturn]] void fail_write(const std::filesystem::path& file, int error) {
  fail("writing {} failed: {}{}", file.string(), std::strerror(error),
       error == ENOSPC || error == EFBIG ? " (free space on that disk, or write the run to another exp_manager.exp_dir)"
                                         : "");
}

}  // namespace

void write_file_atomically(const std::filesystem::path& file, std::string_view text) {
  auto temp = file;
  temp += ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ADAMANT_CHECK(fd >= 0, "cannot create {}: {}", temp.string(), std::strerror(errno));
  const bool written = write_all(fd, text) && ::fsync(fd) == 0;
  const int error = errno;
  if (::close(fd) != 0 || !written) {
    const int reported = written ? errno : error;
    ::unlink(temp.c_str());
    fail_write(file, reported);
  }
  rename_into_place(temp, file);
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

void AppendFile::write(std::string_view text) {
  if (!write_all(fd_, text)) fail_write(file_, errno);
}

void create_folder(const std::filesystem::path& folder, std::string_view what) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    fail("cannot create the {} folder {}: {}; choose a writable location that is not under a file", what,
         folder.string(), ec.message());
  }
}

}  // namespace adamant

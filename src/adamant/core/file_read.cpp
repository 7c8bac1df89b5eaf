#include "adamant/core/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "adamant/core/error.h"

namespace adamant {

ReadOnlyFile::ReadOnlyFile(const std::filesystem::path& file, std::string_view what) {
  fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ADAMANT_CHECK(fd_ >= 0, "cannot open {} {}: {}", what, file.string(), std::strerror(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(fd_);
    fail("cannot read {} {}: {}", what, file.string(), std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    fail("{} {} is not a regular file (a folder or a device); give the path of the file itself", what, file.string());
  }
  size_ = static_cast<std::uint64_t>(info.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool ReadOnlyFile::read_at(std::uint64_t offset, void* dst, std::size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) return false;
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, out, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

std::string read_text_file(const std::filesystem::path& file, std::string_view what) {
  const ReadOnlyFile reader(file, what);
  std::string text(static_cast<std::size_t>(reader.size()), '\0');
  ADAMANT_CHECK(reader.read_at(0, text.data(), text.size()),
                "cannot read {} {}: it shrank while being read, or a read "
                "failed; check the disk",
                what, file.string());
  return text;
}

}  // namespace adamant

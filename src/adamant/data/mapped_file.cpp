#include "adamant/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "adamant/core/error.h"

namespace adamant::data {
namespace {

// Closes the descriptor when open() returns or throws; the mapping outlives it.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    fail("cannot open {}: {}; check the path (a dataset prefix names <prefix>.bin and <prefix>.idx)", path.string(),
         std::strerror(errno));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) fail("cannot stat {}: {}", path.string(), std::strerror(errno));
  ADAMANT_CHECK(S_ISREG(info.st_mode), "{} is not a regular file", path.string());

  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<std::size_t>(info.st_size);
  if (file.size_ == 0) return file;  // mmap rejects length 0; an empty span is the right view
  void* address = ::mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (address == MAP_FAILED) fail("cannot memory-map {}: {}", path.string(), std::strerror(errno));
  file.data_ = static_cast<const std::byte*>(address);
  return file;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace adamant::data

#pragma once
// A read-only memory mapping of a whole file, released on destruction.
#include <cstddef>
#include <filesystem>
#include <span>

namespace adamant::data {

class MappedFile {
 public:
  // Maps `path` read-only; a missing or unreadable file throws adamant::Error naming it.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::filesystem::path path_;
};

}  // namespace adamant::data

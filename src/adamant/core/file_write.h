#pragma once
// Checked file writes. Every byte Adamant writes goes through a call that checks it
// reached the file (a full disk or a read-only folder is an adamant::Error naming the
// file); whole files are written to a temporary name and renamed (atomic_file.h), so a
// reader never sees a half-written one.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace adamant {

// Writes every byte to the open descriptor `fd`, retrying short writes; a failure is an error
// naming `what` and `file` (the name the user knows, also while writing its temporary) and the reason.
void write_checked(int fd, const void* data, std::size_t bytes, std::string_view what,
                   const std::filesystem::path& file);

// The error of a failed write, sync or close (`error` is its errno), worded as write_checked's.
[[noreturn]] void fail_writing(std::string_view what, const std::filesystem::path& file, int error);

// A file opened for appending lines (e.g. metrics.jsonl); each write reaches the kernel
// before it returns and is checked.
class AppendFile {
 public:
  // truncate: start the file empty instead of continuing it.
  AppendFile(std::filesystem::path file, bool truncate);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void write(std::string_view text);
  const std::filesystem::path& path() const { return file_; }

 private:
  std::filesystem::path file_;
  int fd_ = -1;
};

// Renames a finished temporary file to its final name; errors name both.
void rename_into_place(const std::filesystem::path& temp, const std::filesystem::path& file);

// A folder and its parents, created if missing; errors name the folder and the reason.
void create_folder(const std::filesystem::path& folder, std::string_view what);

}  // namespace adamant

#pragma once
// Checked file writes. Every byte Adamant writes goes through a call that checks it
// reached the file (a full disk or a read-only folder is an adamant::Error naming the
// file), and whole files are written to a temporary name and renamed, so a reader
// never sees a half-written one.
#include <filesystem>
#include <string>
#include <string_view>

namespace adamant {

// Writes `text` to <file>.tmp.<pid>, flushes it to disk and renames it to `file`.
void write_file_atomically(const std::filesystem::path& file, std::string_view text);

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

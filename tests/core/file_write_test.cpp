// Checked writes: a full disk (/dev/full, or a file-size limit) is an error naming the file,
// and an atomic write that fails leaves the old file as it was and no temporary behind.
#include "adamant/core/file_write.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <fstream>
#include <functional>
#include <string>

#include "adamant/core/atomic_file.h"
#include "adamant/core/error.h"
#include "support/test_data.h"

namespace adamant {
namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string error_of(const std::function<void()>& write) {
  try {
    write();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Files of this process may not grow past `bytes` while it lives (writes past it fail with EFBIG).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

TEST(FileWrite, AppendToAFullDiskNamesTheFile) {
  AppendFile full("/dev/full", false);
  const std::string message = error_of([&] { full.write("{\"step\": 1}\n"); });
  EXPECT_NE(message.find("/dev/full"), std::string::npos) << message;
  EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
}

TEST(FileWrite, FailedAtomicWriteKeepsTheOldFileAndLeavesNoTemporary) {
  const testing::TempDir dir("file-write");
  const auto file = dir / "config.yaml";
  write_file_atomically(file, "old\n");
  EXPECT_EQ(read_text(file), "old\n");
  std::string message;
  {
    const FileSizeLimit limit(64);
    message = error_of([&] { write_file_atomically(file, std::string(4096, 'x')); });
  }
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read_text(file), "old\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);  // config.yaml alone
  write_file_atomically(file, "new\n");
  EXPECT_EQ(read_text(file), "new\n");
}

TEST(FileWrite, AtomicWriterStoppedByTheFileSizeKeepsTheOldFileAndLeavesNoTemporary) {
  const testing::TempDir dir("atomic-writer");
  const auto file = dir / "model.safetensors";
  write_file_atomically(file, "old\n", "safetensors file");
  std::string message;
  {
    const FileSizeLimit limit(64);
    message = error_of([&] {
      AtomicFileWriter writer(file, "safetensors file");
      writer.write(std::string(40, 'a'));  // fits under the limit
      EXPECT_EQ(writer.position(), 40u);
      writer.write(std::string(40, 'b'));  // crosses it: the short write is retried and fails
      writer.commit();
    });
  }
  EXPECT_NE(message.find("writing safetensors file " + file.string() + " failed"), std::string::npos) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read_text(file), "old\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);  // model.safetensors alone
}

TEST(FileWrite, FoldersUnderAFileOrInAReadOnlyPlaceAreErrorsNamingThem) {
  const testing::TempDir dir("file-write-folders");
  write_file_atomically(dir / "plain", "a file\n");
  const std::string under_file = error_of([&] { create_folder(dir / "plain" / "sub", "output"); });
  EXPECT_NE(under_file.find((dir / "plain" / "sub").string()), std::string::npos) << under_file;
  // /proc refuses new folders even to root, which CI runs as.
  const std::string read_only = error_of([] { create_folder("/proc/adamant-test/sub", "run"); });
  EXPECT_NE(read_only.find("/proc/adamant-test/sub"), std::string::npos) << read_only;
  const std::string no_folder = error_of([&] { AppendFile(dir / "missing" / "metrics.jsonl", true); });
  EXPECT_NE(no_folder.find("missing/metrics.jsonl"), std::string::npos) << no_folder;
}

}  // namespace
}  // namespace adamant

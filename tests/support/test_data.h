#pragma once
// Locates data fetched by scripts/fetch_data.sh (ADAMANT_DATA_DIR, set by ctest), and
// temporary folders that tests leave nothing behind in.
#include <cstddef>
#include <filesystem>
#include <string_view>

namespace adamant::testing {

// The data folder; a test that needs it fails with a message saying how to fetch it.
std::filesystem::path data_dir();

// A fresh, empty folder /tmp/adamant-<name>-<pid>, removed with everything in it when the
// object goes (the end of the test, or of the fixture). It is a path: dir / "file" works.
class TempDir : public std::filesystem::path {
 public:
  TempDir() = default;
  explicit TempDir(std::string_view name);
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

 private:
  void remove() noexcept;
};

inline TempDir temp_dir(std::string_view name) { return TempDir(name); }

// The same kind of folder for all ranks of MPI_COMM_WORLD (rank 0's pid names it): rank 0
// creates it, and removes it once every rank is done with it (the destructor is collective).
class SharedTempDir : public std::filesystem::path {
 public:
  explicit SharedTempDir(std::string_view name);
  SharedTempDir(const SharedTempDir&) = delete;
  SharedTempDir& operator=(const SharedTempDir&) = delete;
  ~SharedTempDir();
};

inline SharedTempDir shared_temp_dir(std::string_view name) { return SharedTempDir(name); }

// How many file descriptors this process holds (the entries of /proc/self/fd): a reader that
// rejects a file must not keep it open.
std::size_t open_file_descriptors();

}  // namespace adamant::testing

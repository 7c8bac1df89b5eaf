#include "support/test_data.h"

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <system_error>
#include <utility>

#include "support/mpi_world.h"

namespace adamant::testing {

namespace {

std::filesystem::path fresh_folder(std::string_view name, long pid) {
  auto dir = std::filesystem::temp_directory_path() / ("adamant-" + std::string(name) + "-" + std::to_string(pid));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

std::filesystem::path data_dir() {
  const char* env = std::getenv("ADAMANT_DATA_DIR");
  std::filesystem::path dir = env != nullptr ? env : ".cache/data";
  if (!std::filesystem::exists(dir / "gpt2" / "encoder.json")) {
    ADD_FAILURE() << "test data not found in " << dir << "; run scripts/fetch_data.sh first";
  }
  return dir;
}

TempDir::TempDir(std::string_view name) : std::filesystem::path(fresh_folder(name, static_cast<long>(::getpid()))) {}

TempDir::TempDir(TempDir&& other) noexcept : std::filesystem::path(std::move(other)) { other.clear(); }

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    remove();
    std::filesystem::path::operator=(std::move(other));
    other.clear();
  }
  return *this;
}

TempDir::~TempDir() { remove(); }

void TempDir::remove() noexcept {
  if (empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(*this, ignored);
}

SharedTempDir::SharedTempDir(std::string_view name) {
  const int rank = world_rank();
  long pid = static_cast<long>(::getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::filesystem::path::operator=(fresh_folder(name, pid));
  } else {
    std::filesystem::path::operator=(std::filesystem::temp_directory_path() /
                                     ("adamant-" + std::string(name) + "-" + std::to_string(pid)));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

SharedTempDir::~SharedTempDir() {
  MPI_Barrier(MPI_COMM_WORLD);
  std::error_code ignored;
  if (world_rank() == 0) std::filesystem::remove_all(*this, ignored);
}

std::size_t open_file_descriptors() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

}  // namespace adamant::testing

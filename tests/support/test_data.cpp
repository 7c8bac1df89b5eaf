#include "support/test_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace adamant::testing {

std::filesystem::path data_dir() {
  const char* env = std::getenv("ADAMANT_DATA_DIR");
  std::filesystem::path dir = env != nullptr ? env : ".cache/data";
  if (!std::filesystem::exists(dir / "gpt2" / "encoder.json")) {
    ADD_FAILURE() << "test data not found in " << dir << "; run scripts/fetch_data.sh first";
  }
  return dir;
}

std::filesystem::path temp_dir(const char* name) {
  auto dir =
      std::filesystem::temp_directory_path() / ("adamant-" + std::string(name) + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace adamant::testing

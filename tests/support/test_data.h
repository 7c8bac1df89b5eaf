#pragma once
// Locates data fetched by scripts/fetch_data.sh (ADAMANT_DATA_DIR, set by ctest).
#include <filesystem>

namespace adamant::testing {

// The data folder; a test that needs it fails with a message saying how to fetch it.
std::filesystem::path data_dir();
// A fresh, empty temporary folder for one test, removed by the caller if wanted.
std::filesystem::path temp_dir(const char* name);

}  // namespace adamant::testing

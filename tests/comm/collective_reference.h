#pragma once
// Known per-rank inputs and the collective results computed from them directly,
// shared by the MPI and NCCL tests. Inputs are small integers (plus exact binary
// fractions for fp64), so every partial sum is exact in every dtype and the
// expected values do not depend on the order in which ranks are combined.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "adamant/comm/collective_checks.h"
#include "adamant/comm/communicator.h"
#include "adamant/core/dtype.h"
#include "adamant/core/half.h"

namespace adamant::comm::testing {

inline constexpr std::array<DType, 7> kCollectiveDTypes = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                                           DType::i32, DType::i64, DType::u8};

inline bool is_integer(DType dtype) {
  return dtype == DType::i32 || dtype == DType::i64 || dtype == DType::u8 || dtype == DType::u16;
}

// Element i of rank `rank`'s input. Signed types get negative values too; i64
// gets a term beyond 32 bits and fp64 a fraction below fp32's precision.
inline double input_value(DType dtype, int rank, std::size_t i) {
  const double base = static_cast<double>((static_cast<std::size_t>(rank) * 7 + i * 3) % 23);
  switch (dtype) {
    case DType::u8:
    case DType::u16:
      return base;
    case DType::i64:
      return base - 11 + static_cast<double>(rank) * 8589934592.0;  // rank * 2^33
    case DType::f64:
      return base - 11 + (rank + 1) * std::ldexp(1.0, -40);
    default:
      return base - 11;
  }
}

// Stores `value` as element i of `dtype` (rounding to nearest even for 16-bit floats).
inline void store_value(DType dtype, void* base, std::size_t i, double value) {
  switch (dtype) {
    case DType::f32:
      static_cast<float*>(base)[i] = static_cast<float>(value);
      return;
    case DType::f64:
      static_cast<double*>(base)[i] = value;
      return;
    case DType::bf16:
      static_cast<std::uint16_t*>(base)[i] = f32_to_bf16(static_cast<float>(value));
      return;
    case DType::f16:
      static_cast<std::uint16_t*>(base)[i] = f32_to_f16(static_cast<float>(value));
      return;
    case DType::i32:
      static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(value);
      return;
    case DType::i64:
      static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(value);
      return;
    case DType::u16:
      static_cast<std::uint16_t*>(base)[i] = static_cast<std::uint16_t>(value);
      return;
    case DType::u8:
      static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(value);
      return;
  }
}

inline double load_value(DType dtype, const void* base, std::size_t i) {
  switch (dtype) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::f64:
      return static_cast<const double*>(base)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case DType::i32:
      return static_cast<const std::int32_t*>(base)[i];
    case DType::i64:
      return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
    case DType::u16:
      return static_cast<const std::uint16_t*>(base)[i];
    case DType::u8:
      return static_cast<const std::uint8_t*>(base)[i];
  }
  return 0;
}

// Host bytes holding elements [first, first + count) of rank `rank`'s input.
inline std::vector<std::byte> make_input(DType dtype, int rank, std::size_t count, std::size_t first = 0) {
  std::vector<std::byte> bytes(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) store_value(dtype, bytes.data(), i, input_value(dtype, rank, first + i));
  return bytes;
}

// The value of element i after reducing every rank's input with `op`, as the
// result dtype holds it. avg is the exact sum divided by the group size in the
// element type (fp32 arithmetic with round to nearest even for bf16/fp16).
inline double reduced_value(DType dtype, ReduceOp op, int size, std::size_t i) {
  double sum = 0;
  double max = input_value(dtype, 0, i);
  for (int r = 0; r < size; ++r) {
    sum += input_value(dtype, r, i);
    max = std::max(max, input_value(dtype, r, i));
  }
  if (op == ReduceOp::max) return max;
  if (op == ReduceOp::sum) return sum;
  double mean = 0;
  alignas(8) std::byte scratch[8];
  switch (dtype) {
    case DType::f64:
      return sum / size;
    case DType::f32:
    case DType::bf16:
    case DType::f16:
      mean = static_cast<float>(sum) / static_cast<float>(size);
      break;
    default:
      mean = sum / size;
      break;
  }
  store_value(dtype, scratch, 0, mean);
  return load_value(dtype, scratch, 0);
}

// The reduce ops a dtype supports (avg only for floating types).
inline std::vector<ReduceOp> ops_for(DType dtype) {
  if (is_integer(dtype)) return {ReduceOp::sum, ReduceOp::max};
  return {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};
}

// Compares `count` elements of `data` with expected(i); returns "" when all
// match, else the first mismatch and how many there are. It never stops early:
// under MPI a rank that left a test at the first failure would leave the other
// ranks waiting in the next collective.
// With `relative_tolerance` > 0, values within that fraction of expected(i) match.
template <typename ExpectedFn>
std::string mismatches(DType dtype, const void* data, std::size_t count, ExpectedFn expected,
                       double relative_tolerance = 0) {
  std::size_t wrong = 0;
  std::string first;
  for (std::size_t i = 0; i < count; ++i) {
    const double got = load_value(dtype, data, i);
    const double want = expected(i);
    if (got == want || std::abs(got - want) <= relative_tolerance * std::abs(want)) continue;
    if (wrong++ == 0) {
      first = "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " + std::to_string(want);
    }
  }
  if (wrong == 0) return "";
  return first + " (" + std::to_string(wrong) + " of " + std::to_string(count) + " elements wrong)";
}

}  // namespace adamant::comm::testing

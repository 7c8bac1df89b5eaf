#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace adamant {

// Element types. f64 exists for reference computations (gradient checks).
enum class DType : std::uint8_t { f32, f64, bf16, f16, i32, i64, u16, u8 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::bf16:
    case DType::f16:
    case DType::u16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "fp32";
    case DType::f64:
      return "fp64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "fp16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u16:
      return "uint16";
    case DType::u8:
      return "uint8";
  }
  return "?";
}

// Accepts "fp32"/"float32"/"32", "bf16"/"bfloat16", "fp16"/"float16"/"16", ...; throws adamant::Error naming `what`.
DType parse_dtype(std::string_view text, std::string_view what);

}  // namespace adamant

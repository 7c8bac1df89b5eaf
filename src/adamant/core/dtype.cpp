#include "adamant/core/dtype.h"

#include "adamant/core/error.h"

namespace adamant {

DType parse_dtype(std::string_view text, std::string_view what) {
  if (text == "fp32" || text == "float32" || text == "float" || text == "32" || text == "32-true") return DType::f32;
  if (text == "bf16" || text == "bfloat16" || text == "bf16-mixed" || text == "bf16-true") return DType::bf16;
  if (text == "fp16" || text == "float16" || text == "16" || text == "16-mixed" || text == "half") return DType::f16;
  if (text == "fp64" || text == "float64" || text == "64") return DType::f64;
  fail("{}: unknown data type '{}'; use one of fp32, bf16, fp16", what, text);
}

}  // namespace adamant

#include "adamant/comm/mpi_reduce_ops.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "adamant/comm/mpi_check.h"
#include "adamant/core/half.h"

namespace adamant::comm {

namespace {

using ToFloat = float (*)(std::uint16_t);
using FromFloat = std::uint16_t (*)(float);

template <ToFloat to_float, FromFloat from_float>
void sum_16bit(void* in, void* inout, int* length, MPI_Datatype* /*datatype*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = from_float(to_float(a[i]) + to_float(b[i]));
}

// The op is declared commutative, so max(a, b) and max(b, a) must give the same
// bits even where the values compare equal (+0 and -0) or are unordered (NaN):
// NaN wins, and ties go to the smaller bit pattern (+0 over -0).
template <ToFloat to_float>
void max_16bit(void* in, void* inout, int* length, MPI_Datatype* /*datatype*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) {
    const float x = to_float(a[i]);
    const float y = to_float(b[i]);
    const bool x_nan = std::isnan(x);
    const bool y_nan = std::isnan(y);
    bool take_x;
    if (x_nan || y_nan) {
      take_x = x_nan && (!y_nan || a[i] < b[i]);
    } else {
      take_x = x > y || (x == y && a[i] < b[i]);
    }
    if (take_x) b[i] = a[i];
  }
}

float bf16_as_float(std::uint16_t bits) { return bf16_to_f32(bits); }
std::uint16_t float_as_bf16(float value) { return f32_to_bf16(value); }
float f16_as_float(std::uint16_t bits) { return f16_to_f32(bits); }
std::uint16_t float_as_f16(float value) { return f32_to_f16(value); }

template <typename T>
void divide_elements(void* data, std::size_t count, T divisor) {
  auto* values = static_cast<T*>(data);
  for (std::size_t i = 0; i < count; ++i) values[i] /= divisor;
}

template <ToFloat to_float, FromFloat from_float>
void divide_16bit(void* data, std::size_t count, float divisor) {
  auto* values = static_cast<std::uint16_t*>(data);
  for (std::size_t i = 0; i < count; ++i) values[i] = from_float(to_float(values[i]) / divisor);
}

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::bf16:
    case DType::f16:
    case DType::u16:
      return MPI_UINT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
  }
  fail("MPI communicator: unsupported dtype code {}", static_cast<int>(dtype));
}

MpiReduceOps::OwnedOp::OwnedOp(MPI_User_function* function) {
  check_mpi(MPI_Op_create(function, /*commute=*/1, &op_), "MPI_Op_create (bf16/fp16 reduction)");
}

MpiReduceOps::OwnedOp::~OwnedOp() {
  if (op_ != MPI_OP_NULL && mpi_is_active()) MPI_Op_free(&op_);
}

MpiReduceOps::MpiReduceOps()
    : bf16_sum_(&sum_16bit<bf16_as_float, float_as_bf16>),
      bf16_max_(&max_16bit<bf16_as_float>),
      f16_sum_(&sum_16bit<f16_as_float, float_as_f16>),
      f16_max_(&max_16bit<f16_as_float>) {}

MPI_Op MpiReduceOps::op_for(DType dtype, ReduceOp op) const {
  const bool is_max = op == ReduceOp::max;
  switch (dtype) {
    case DType::bf16:
      return is_max ? bf16_max_.get() : bf16_sum_.get();
    case DType::f16:
      return is_max ? f16_max_.get() : f16_sum_.get();
    default:
      return is_max ? MPI_MAX : MPI_SUM;
  }
}

void divide_in_place(void* data, DType dtype, std::size_t count, int divisor) {
  switch (dtype) {
    case DType::f32:
      return divide_elements<float>(data, count, static_cast<float>(divisor));
    case DType::f64:
      return divide_elements<double>(data, count, static_cast<double>(divisor));
    case DType::bf16:
      return divide_16bit<bf16_as_float, float_as_bf16>(data, count, static_cast<float>(divisor));
    case DType::f16:
      return divide_16bit<f16_as_float, float_as_f16>(data, count, static_cast<float>(divisor));
    default:
      fail("avg of {} tensors is not supported; use sum", dtype_name(dtype));
  }
}

}  // namespace adamant::comm

// Row-major products on cuBLASLt (cublaslt_matmul.h).
//
// Mapping: a row-major [r, c] matrix with row stride s is the column-major [c, r]
// matrix with leading dimension s. The row-major C[m, n] = op(A) op(B) therefore
// is the column-major C^T[n, m] = op(B)^T op(A)^T: cuBLASLt's first operand is our
// b (transposed exactly when transpose_b), its second our a (transposed exactly
// when transpose_a), and its problem size is M = n, N = m, K = k. The bias of
// EPILOGUE_BIAS runs along cuBLASLt's M (our columns).
#include <cuda_runtime.h>

#include <algorithm>

#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/cuda/launchers.h"
#include "adamant/kernels/cuda/workspace_resources.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels::cuda {

cudaStream_t stream_handle(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

namespace {

cudaDataType_t cuda_type_of(DType dtype, const char* operand) {
  switch (dtype) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f32:
      return CUDA_R_32F;
    default:
      fail("matmul: operand {} is {}; the GPU products take bf16 or fp32", operand, dtype_name(dtype));
  }
}

void check_operands(const MatmulProblem& p) {
  ADAMANT_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0, "matmul: negative size {}x{}x{}", p.m, p.n, p.k);
  ADAMANT_CHECK(p.a.dtype == p.b.dtype, "matmul: a is {} but b is {}; both must have one dtype", dtype_name(p.a.dtype),
                dtype_name(p.b.dtype));
  ADAMANT_CHECK(p.a.dtype == DType::bf16 || p.a.dtype == DType::f32, "matmul: inputs of {}; expected bf16 or fp32",
                dtype_name(p.a.dtype));
  ADAMANT_CHECK(p.c_dtype == DType::bf16 || p.c_dtype == DType::f32, "matmul: output of {}; expected bf16 or fp32",
                dtype_name(p.c_dtype));
  ADAMANT_CHECK(!(p.a.dtype == DType::f32 && p.c_dtype == DType::bf16),
                "matmul: fp32 inputs with a bf16 output are not supported; use an fp32 output");
  const bool ta = p.transpose_a == Transpose::yes, tb = p.transpose_b == Transpose::yes;
  // An empty inner dimension (k = 0) leaves a or b with zero-length rows, and so a zero stride.
  ADAMANT_CHECK(p.a.row_stride >= (ta ? p.m : p.k) && (p.a.row_stride >= 1 || p.k == 0),
                "matmul: a's row stride {} is shorter than its stored rows ({})", p.a.row_stride, ta ? p.m : p.k);
  ADAMANT_CHECK(p.b.row_stride >= (tb ? p.k : p.n) && (p.b.row_stride >= 1 || p.k == 0),
                "matmul: b's row stride {} is shorter than its stored rows ({})", p.b.row_stride, tb ? p.k : p.n);
  ADAMANT_CHECK(p.c_row_stride >= p.n && p.c_row_stride >= 1, "matmul: c's row stride {} is shorter than n = {}",
                p.c_row_stride, p.n);
  const bool reads_bias = p.epilogue == MatmulEpilogue::add_bias || p.epilogue == MatmulEpilogue::tanh_gelu_aux_bias;
  ADAMANT_CHECK(!reads_bias || p.bias != nullptr, "matmul: the epilogue needs a bias pointer");
  if (p.epilogue == MatmulEpilogue::tanh_gelu_aux_bias || p.epilogue == MatmulEpilogue::tanh_dgelu) {
    ADAMANT_CHECK(p.aux != nullptr && pointer_alignment(p.aux) >= 16,
                  "matmul: the GELU epilogues need a 16-byte aligned pre-activation (aux) pointer");
    ADAMANT_CHECK(p.c_dtype == DType::bf16 && p.a.dtype == DType::bf16 && p.beta == 0.0f,
                  "matmul: the GELU epilogues take bf16 operands and output, and beta 0");
  }
}

const char* epilogue_name(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::none:
      return "none";
    case MatmulEpilogue::add_bias:
      return "bias";
    case MatmulEpilogue::tanh_gelu_aux_bias:
      return "GELU_AUX_BIAS";
    case MatmulEpilogue::tanh_dgelu:
      return "DGELU";
  }
  return "?";
}

// c = beta * c for an empty inner dimension, where cuBLASLt has nothing to multiply.
void scale_output(const MatmulProblem& p, Device device, cudaStream_t stream) {
  const std::size_t element = dtype_size(p.c_dtype);
  if (p.beta == 0.0f) {
    ADAMANT_CUDA_CHECK(cudaMemset2DAsync(p.c, static_cast<std::size_t>(p.c_row_stride) * element, 0,
                                         static_cast<std::size_t>(p.n) * element, static_cast<std::size_t>(p.m),
                                         stream));
    return;
  }
  if (p.beta == 1.0f) return;
  ADAMANT_CHECK(p.c_row_stride == p.n, "matmul: k = 0 with beta {} needs a contiguous output (row stride {}, n {})",
                p.beta, p.c_row_stride, p.n);
  launchers::LaunchShape shape{};
  ADAMANT_CUDA_CHECK(cudaDeviceGetAttribute(&shape.multiprocessors, cudaDevAttrMultiProcessorCount, device.index));
  shape.vectorized = reinterpret_cast<std::uintptr_t>(p.c) % (4 * element) == 0;
  const cudaError_t status = launchers::scale(p.c, p.c_dtype, p.beta, p.m * p.n, shape, stream);
  ADAMANT_CHECK(status == cudaSuccess, "matmul: scaling the output failed to launch: {}", cudaGetErrorString(status));
}

MatmulShape key_of(const MatmulProblem& p) {
  MatmulShape key;
  key.transa = p.transpose_b == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  key.transb = p.transpose_a == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  key.m = static_cast<std::uint64_t>(p.n);
  key.n = static_cast<std::uint64_t>(p.m);
  key.k = static_cast<std::uint64_t>(p.k);
  key.lda = p.b.row_stride;
  key.ldb = p.a.row_stride;
  key.ldc = p.c_row_stride;
  key.a_type = cuda_type_of(p.b.dtype, "b");
  key.b_type = cuda_type_of(p.a.dtype, "a");
  key.c_type = cuda_type_of(p.c_dtype, "c");
  key.align_a = pointer_alignment(p.b.data);
  key.align_b = pointer_alignment(p.a.data);
  key.align_c = pointer_alignment(p.c);
  switch (p.epilogue) {
    case MatmulEpilogue::none:
      break;
    case MatmulEpilogue::add_bias:
      key.epilogue = CUBLASLT_EPILOGUE_BIAS;
      key.bias_type = cuda_type_of(p.bias_dtype, "bias");
      key.align_bias = pointer_alignment(p.bias);
      break;
    case MatmulEpilogue::tanh_gelu_aux_bias:
      key.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
      key.bias_type = cuda_type_of(p.bias_dtype, "bias");
      key.align_bias = pointer_alignment(p.bias);
      break;
    case MatmulEpilogue::tanh_dgelu:
      key.epilogue = CUBLASLT_EPILOGUE_DGELU;
      break;
  }
  // The aux matrix has c's shape and stride: the key's output alignment covers both.
  if (p.aux != nullptr) key.align_c = std::min(key.align_c, pointer_alignment(p.aux));
  return key;
}

[[noreturn]] void fail_unsupported(const MatmulProblem& p, const char* epilogue) {
  fail("matmul: cuBLASLt has no algorithm for {}x{}x{} (transpose a {}, b {}), {} inputs, {} output, epilogue {}", p.m,
       p.n, p.k, p.transpose_a == Transpose::yes, p.transpose_b == Transpose::yes, dtype_name(p.a.dtype),
       dtype_name(p.c_dtype), epilogue);
}

}  // namespace

void matmul(const MatmulProblem& problem, Workspace& workspace, const Stream& stream) {
  const Device device = workspace.device();
  check_operands(problem);
  if (problem.m == 0 || problem.n == 0) return;
  const CurrentDevice current(device);
  const cudaStream_t cuda_stream = stream_handle(stream);
  if (problem.k == 0) {
    ADAMANT_CHECK(problem.epilogue == MatmulEpilogue::none, "matmul: k = 0 with the {} epilogue is not supported",
                  epilogue_name(problem.epilogue));
    scale_output(problem, device, cuda_stream);
    return;
  }

  MatmulArguments arguments;
  arguments.alpha = problem.alpha;
  arguments.beta = problem.beta;
  arguments.a = problem.b.data;
  arguments.b = problem.a.data;
  arguments.c = problem.c;
  arguments.bias = problem.bias;
  arguments.aux = problem.aux;
  CublasLtContext& context = workspace.resources().matmul();
  if (!context.try_matmul(key_of(problem), arguments, cuda_stream)) {
    fail_unsupported(problem, epilogue_name(problem.epilogue));
  }
}

}  // namespace adamant::kernels::cuda

#pragma once
// cuBLASLt state of one kernels::Workspace (kernels/workspace.h): a handle, the
// workspace of the stream it serves, and the matmul plans (descriptor, layouts and
// the algorithm chosen by the heuristics) per problem, built on a problem's first
// call and kept, so that a training step only enqueues work. Only for host files
// compiled in CUDA builds.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "adamant/core/buffer.h"
#include "adamant/core/device.h"

namespace adamant::kernels::cuda {

// Throws adamant::Error naming `what` and the cuBLAS status when status is not success.
void check_cublas(cublasStatus_t status, const char* what);

// Everything the heuristics look at, in cuBLASLt's column-major terms (D = C in
// place). Equal keys share one plan.
struct MatmulPlanKey {
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
  std::uint64_t m = 0;
  std::uint64_t n = 0;
  std::uint64_t k = 0;
  std::int64_t lda = 0;
  std::int64_t ldb = 0;
  std::int64_t ldc = 0;
  cudaDataType_t a_type = CUDA_R_32F;
  cudaDataType_t b_type = CUDA_R_32F;
  cudaDataType_t c_type = CUDA_R_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  cudaDataType_t bias_type = CUDA_R_32F;  // only read with a bias epilogue
  // Byte alignments of the operands (powers of two up to 256): algorithms that
  // need more than the actual pointers have are excluded.
  std::uint32_t align_a = 256;
  std::uint32_t align_b = 256;
  std::uint32_t align_c = 256;
  std::uint32_t align_bias = 256;

  auto operator<=>(const MatmulPlanKey&) const = default;
};

// Largest power of two (up to 256) dividing the address; 256 for nullptr.
std::uint32_t pointer_alignment(const void* pointer);

// The device pointers and scalars of one matmul.
struct MatmulArguments {
  float alpha = 1.0f;
  float beta = 0.0f;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;     // read (when beta != 0) and written
  void* bias = nullptr;  // bias (read) or bias gradient (written), per the key's epilogue
};

// Descriptor, layouts and algorithm of one problem. RAII over the cuBLASLt objects.
class MatmulPlan {
 public:
  MatmulPlan(cublasLtHandle_t handle, const MatmulPlanKey& key, std::size_t workspace_bytes);
  ~MatmulPlan();
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;

  // False when the heuristics found no algorithm for the problem.
  bool supported() const { return supported_; }
  // Enqueues the product on `stream`; the caller holds the context's lock.
  cublasStatus_t run(cublasLtHandle_t handle, const MatmulArguments& arguments, void* workspace,
                     std::size_t workspace_bytes, cudaStream_t stream) const;

 private:
  void release() noexcept;

  cublasLtMatmulDesc_t description_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr;
  cublasLtMatrixLayout_t layout_b_ = nullptr;
  cublasLtMatrixLayout_t layout_c_ = nullptr;
  cublasLtMatmulAlgo_t algorithm_{};
  bool has_bias_ = false;
  bool supported_ = false;
};

// Scratch memory of one stream: cuBLASLt's workspace, which stream-ordered kernels
// running between matmuls on that stream may borrow too.
struct DeviceScratch {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// A cuBLASLt handle, the workspace of one stream, and the plans. Thread safe.
class CublasLtContext {
 public:
  // 32 MiB: what cuBLASLt recommends for Hopper.
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

  // The caller has made `device` current.
  explicit CublasLtContext(Device device);
  ~CublasLtContext();
  CublasLtContext(const CublasLtContext&) = delete;
  CublasLtContext& operator=(const CublasLtContext&) = delete;

  // Enqueues the matmul of `key` on `stream`. Returns false, with nothing
  // enqueued, when cuBLASLt has no algorithm for it; throws on other failures.
  bool try_matmul(const MatmulPlanKey& key, const MatmulArguments& arguments, cudaStream_t stream);
  DeviceScratch scratch() { return {workspace_.data(), workspace_.bytes()}; }

 private:
  cublasLtHandle_t handle_ = nullptr;
  Buffer workspace_;
  std::mutex mutex_;
  std::map<MatmulPlanKey, std::unique_ptr<MatmulPlan>> plans_;
};

}  // namespace adamant::kernels::cuda

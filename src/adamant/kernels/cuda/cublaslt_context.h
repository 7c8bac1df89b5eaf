#pragma once
// cuBLASLt state of one kernels::Workspace (kernels/workspace.h): a handle, the
// workspace of the stream it serves, and the matmul plans (descriptor, layouts and
// the algorithm: recorded by tune-matmul, or the heuristics' first answer) per problem,
// built on a problem's first call and kept, so that a training step only enqueues work. Only for host files
// compiled in CUDA builds.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/device.h"
#include "adamant/kernels/matmul_algorithms.h"

namespace adamant::kernels::cuda {

// Throws adamant::Error naming `what` and the cuBLAS status when status is not success.
void check_cublas(cublasStatus_t status, const char* what);

// Largest power of two (up to 256) dividing the address; 256 for nullptr.
std::uint32_t pointer_alignment(const void* pointer);

// Whether a key's epilogue (MatmulShape::epilogue) reads a bias vector, and whether it has an
// aux matrix of the output's shape (the GELU epilogues' pre-activation).
bool is_bias_epilogue(std::uint32_t epilogue);
bool is_aux_epilogue(std::uint32_t epilogue);

// The device pointers and scalars of one matmul.
struct MatmulArguments {
  float alpha = 1.0f;
  float beta = 0.0f;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;     // read (when beta != 0) and written
  void* bias = nullptr;  // bias (read) or bias gradient (written), per the key's epilogue
  void* aux = nullptr;   // the GELU epilogues' pre-activation (written by GELU_AUX_BIAS, read by DGELU)
};

// Descriptor and layouts of one problem. RAII over the cuBLASLt objects.
class MatmulDescriptors {
 public:
  explicit MatmulDescriptors(const MatmulShape& key);
  ~MatmulDescriptors();
  MatmulDescriptors(const MatmulDescriptors&) = delete;
  MatmulDescriptors& operator=(const MatmulDescriptors&) = delete;

  // cuBLASLt's heuristic answers, best first, at most `count`, those it cannot run within
  // workspace_bytes left out; empty when it has none.
  std::vector<cublasLtMatmulAlgo_t> candidates(cublasLtHandle_t handle, std::size_t workspace_bytes, int count) const;
  // Whether cuBLASLt runs `algorithm` on this problem within workspace_bytes.
  bool accepts(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algorithm, std::size_t workspace_bytes) const;
  // Enqueues the product with `algorithm` on `stream`; the caller holds the context's lock.
  cublasStatus_t run(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algorithm, const MatmulArguments& arguments,
                     void* workspace, std::size_t workspace_bytes, cudaStream_t stream) const;

 private:
  void release() noexcept;

  MatmulShape key_;
  cublasLtMatmulDesc_t description_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr;
  cublasLtMatrixLayout_t layout_b_ = nullptr;
  cublasLtMatrixLayout_t layout_c_ = nullptr;
  bool has_bias_ = false;
  bool has_aux_ = false;
};

// An algorithm's configuration attributes (cuBLASLt's values).
MatmulAlgorithmConfig algorithm_config(const cublasLtMatmulAlgo_t& algorithm);

// The descriptors of one problem and its algorithm: the recorded one when `recorded` is
// given (`source` names its table in errors), else the heuristics' first answer.
class MatmulPlan {
 public:
  MatmulPlan(cublasLtHandle_t handle, const MatmulShape& key, std::size_t workspace_bytes,
             const MatmulAlgorithmChoice* recorded, const std::string& source);

  // False when the heuristics found no algorithm for the problem.
  bool supported() const { return supported_; }
  bool recorded() const { return recorded_; }
  // Enqueues the product on `stream`; the caller holds the context's lock.
  cublasStatus_t run(cublasLtHandle_t handle, const MatmulArguments& arguments, void* workspace,
                     std::size_t workspace_bytes, cudaStream_t stream) const {
    return descriptors_.run(handle, algorithm_, arguments, workspace, workspace_bytes, stream);
  }

 private:
  MatmulDescriptors descriptors_;
  cublasLtMatmulAlgo_t algorithm_{};
  bool supported_ = false;
  bool recorded_ = false;
};

// A problem a context has run: its key, and whether any call added to the output (beta != 0).
struct MatmulProblemSeen {
  MatmulShape key;
  bool accumulates = false;
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

  // The caller has made `device` current. Problems with a choice in `algorithms` for this
  // GPU and cuBLASLt version use it; the others the heuristics' first answer.
  CublasLtContext(Device device, std::shared_ptr<const MatmulAlgorithmTable> algorithms);
  ~CublasLtContext();
  CublasLtContext(const CublasLtContext&) = delete;
  CublasLtContext& operator=(const CublasLtContext&) = delete;

  // Enqueues the matmul of `key` on `stream`. Returns false, with nothing
  // enqueued, when cuBLASLt has no algorithm for it; throws on other failures.
  bool try_matmul(const MatmulShape& key, const MatmulArguments& arguments, cudaStream_t stream);
  DeviceScratch scratch() { return {workspace_.data(), workspace_.bytes()}; }

  cublasLtHandle_t handle() const { return handle_; }
  const MatmulTarget& target() const { return target_; }
  // The problems run so far, in key order.
  std::vector<MatmulProblemSeen> problems() const;
  // How many of them run a recorded algorithm.
  std::size_t recorded_plans() const;

 private:
  struct PlanEntry {
    std::unique_ptr<MatmulPlan> plan;
    bool accumulates = false;
  };

  cublasLtHandle_t handle_ = nullptr;
  Buffer workspace_;
  MatmulTarget target_;
  std::shared_ptr<const MatmulAlgorithmTable> algorithms_;
  mutable std::mutex mutex_;
  std::map<MatmulShape, PlanEntry> plans_;
};

}  // namespace adamant::kernels::cuda

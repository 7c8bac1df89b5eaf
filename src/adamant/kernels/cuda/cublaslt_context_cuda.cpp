// cuBLASLt handles, workspaces and cached matmul plans (cublaslt_context.h).
#include <cstdint>

#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"
#include "adamant/kernels/cuda/cublaslt_context.h"

namespace adamant::kernels::cuda {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    fail("{} failed: cuBLAS status {} ({})", what, cublasLtGetStatusName(status), static_cast<int>(status));
  }
}

std::uint32_t pointer_alignment(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address == 0) return 256;
  const std::uintptr_t lowest_bit = address & (~address + 1);
  return lowest_bit >= 256 ? 256u : static_cast<std::uint32_t>(lowest_bit);
}

namespace {

template <typename Value>
void set_description(cublasLtMatmulDesc_t description, cublasLtMatmulDescAttributes_t attribute, const Value& value) {
  check_cublas(cublasLtMatmulDescSetAttribute(description, attribute, &value, sizeof(value)),
               "cublasLtMatmulDescSetAttribute");
}

template <typename Value>
void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                    const Value& value) {
  check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)),
               "cublasLtMatmulPreferenceSetAttribute");
}

// Stored (pre-transpose) shape of an operand: op(X) is rows x cols of the product.
cublasLtMatrixLayout_t make_layout(cudaDataType_t type, cublasOperation_t op, std::uint64_t product_rows,
                                   std::uint64_t product_cols, std::int64_t leading_dim) {
  const bool transposed = op != CUBLAS_OP_N;
  cublasLtMatrixLayout_t layout = nullptr;
  check_cublas(cublasLtMatrixLayoutCreate(&layout, type, transposed ? product_cols : product_rows,
                                          transposed ? product_rows : product_cols, leading_dim),
               "cublasLtMatrixLayoutCreate");
  return layout;
}

bool is_bias_epilogue(cublasLtEpilogue_t epilogue) { return epilogue == CUBLASLT_EPILOGUE_BIAS; }

// A preference object for one heuristic query.
class Preference {
 public:
  Preference() { check_cublas(cublasLtMatmulPreferenceCreate(&preference_), "cublasLtMatmulPreferenceCreate"); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(preference_); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  cublasLtMatmulPreference_t get() const { return preference_; }

 private:
  cublasLtMatmulPreference_t preference_ = nullptr;
};

}  // namespace

MatmulPlan::MatmulPlan(cublasLtHandle_t handle, const MatmulPlanKey& key, std::size_t workspace_bytes) {
  try {
    check_cublas(cublasLtMatmulDescCreate(&description_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    set_description(description_, CUBLASLT_MATMUL_DESC_POINTER_MODE,
                    static_cast<std::int32_t>(CUBLASLT_POINTER_MODE_HOST));
    set_description(description_, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(key.transa));
    set_description(description_, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(key.transb));
    set_description(description_, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(key.epilogue));
    has_bias_ = is_bias_epilogue(key.epilogue);
    if (has_bias_) {
      set_description(description_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<std::int32_t>(key.bias_type));
      // The heuristics read the alignment of the bias pointer without dereferencing
      // it: an address with exactly the key's alignment stands in for the real one.
      const void* stand_in = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(key.align_bias));
      set_description(description_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, stand_in);
    }
    layout_a_ = make_layout(key.a_type, key.transa, key.m, key.k, key.lda);
    layout_b_ = make_layout(key.b_type, key.transb, key.k, key.n, key.ldb);
    layout_c_ = make_layout(key.c_type, CUBLAS_OP_N, key.m, key.n, key.ldc);

    const Preference preference;
    set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                   static_cast<std::uint64_t>(workspace_bytes));
    set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
    set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
    set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);

    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, description_, layout_a_, layout_b_, layout_c_,
                                                                 layout_c_, preference.get(), 1, &result, &found);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) return;  // no algorithm: supported_ stays false
    check_cublas(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS || result.workspaceSize > workspace_bytes) return;
    algorithm_ = result.algo;
    supported_ = true;
  } catch (...) {
    release();  // a throwing constructor runs no destructor
    throw;
  }
}

MatmulPlan::~MatmulPlan() { release(); }

void MatmulPlan::release() noexcept {
  if (layout_c_ != nullptr) cublasLtMatrixLayoutDestroy(layout_c_);
  if (layout_b_ != nullptr) cublasLtMatrixLayoutDestroy(layout_b_);
  if (layout_a_ != nullptr) cublasLtMatrixLayoutDestroy(layout_a_);
  if (description_ != nullptr) cublasLtMatmulDescDestroy(description_);
  layout_c_ = layout_b_ = layout_a_ = nullptr;
  description_ = nullptr;
}

cublasStatus_t MatmulPlan::run(cublasLtHandle_t handle, const MatmulArguments& arguments, void* workspace,
                               std::size_t workspace_bytes, cudaStream_t stream) const {
  if (has_bias_) {
    const cublasStatus_t status = cublasLtMatmulDescSetAttribute(description_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                 &arguments.bias, sizeof(arguments.bias));
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  return cublasLtMatmul(handle, description_, &arguments.alpha, arguments.a, layout_a_, arguments.b, layout_b_,
                        &arguments.beta, arguments.c, layout_c_, arguments.c, layout_c_, &algorithm_, workspace,
                        workspace_bytes, stream);
}

CublasLtContext::CublasLtContext(Device device) : workspace_(kWorkspaceBytes, device) {
  check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
}

CublasLtContext::~CublasLtContext() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

bool CublasLtContext::try_matmul(const MatmulPlanKey& key, const MatmulArguments& arguments, cudaStream_t stream) {
  // One lock over lookup and enqueue: a plan's descriptor holds the bias pointer of
  // the call being enqueued.
  const std::lock_guard lock(mutex_);
  auto& plan = plans_[key];
  if (!plan) plan = std::make_unique<MatmulPlan>(handle_, key, kWorkspaceBytes);
  if (!plan->supported()) return false;
  const cublasStatus_t status = plan->run(handle_, arguments, workspace_.data(), workspace_.bytes(), stream);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  check_cublas(status, "cublasLtMatmul");
  return true;
}

}  // namespace adamant::kernels::cuda

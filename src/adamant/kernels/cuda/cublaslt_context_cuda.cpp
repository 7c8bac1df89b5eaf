// cuBLASLt handles, workspaces and cached matmul plans (cublaslt_context.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

bool is_bias_epilogue(std::uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

bool is_aux_epilogue(std::uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_DGELU;
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

MatmulDescriptors::MatmulDescriptors(const MatmulShape& key) : key_(key) {
  try {
    const auto transa = static_cast<cublasOperation_t>(key.transa);
    const auto transb = static_cast<cublasOperation_t>(key.transb);
    const auto epilogue = static_cast<cublasLtEpilogue_t>(key.epilogue);
    check_cublas(cublasLtMatmulDescCreate(&description_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    set_description(description_, CUBLASLT_MATMUL_DESC_POINTER_MODE,
                    static_cast<std::int32_t>(CUBLASLT_POINTER_MODE_HOST));
    set_description(description_, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(transa));
    set_description(description_, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(transb));
    set_description(description_, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(epilogue));
    has_bias_ = is_bias_epilogue(key.epilogue);
    if (has_bias_) {
      set_description(description_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, key.bias_type);
      // The heuristics read the alignment of the bias pointer without dereferencing
      // it: an address with exactly the key's alignment stands in for the real one.
      const void* stand_in = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(key.align_bias));
      set_description(description_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, stand_in);
    }
    has_aux_ = is_aux_epilogue(key.epilogue);
    if (has_aux_) {  // of the output's shape, stride and type; the key's align_c covers its alignment too
      set_description(description_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.ldc);
      const void* stand_in = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(key.align_c));
      set_description(description_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, stand_in);
    }
    layout_a_ = make_layout(static_cast<cudaDataType_t>(key.a_type), transa, key.m, key.k, key.lda);
    layout_b_ = make_layout(static_cast<cudaDataType_t>(key.b_type), transb, key.k, key.n, key.ldb);
    layout_c_ = make_layout(static_cast<cudaDataType_t>(key.c_type), CUBLAS_OP_N, key.m, key.n, key.ldc);
  } catch (...) {
    release();  // a throwing constructor runs no destructor
    throw;
  }
}

MatmulDescriptors::~MatmulDescriptors() { release(); }

void MatmulDescriptors::release() noexcept {
  if (layout_c_ != nullptr) cublasLtMatrixLayoutDestroy(layout_c_);
  if (layout_b_ != nullptr) cublasLtMatrixLayoutDestroy(layout_b_);
  if (layout_a_ != nullptr) cublasLtMatrixLayoutDestroy(layout_a_);
  if (description_ != nullptr) cublasLtMatmulDescDestroy(description_);
  layout_c_ = layout_b_ = layout_a_ = nullptr;
  description_ = nullptr;
}

std::vector<cublasLtMatmulAlgo_t> MatmulDescriptors::candidates(cublasLtHandle_t handle, std::size_t workspace_bytes,
                                                                int count) const {
  const Preference preference;
  set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                 static_cast<std::uint64_t>(workspace_bytes));
  set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key_.align_a);
  set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key_.align_b);
  set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key_.align_c);
  set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key_.align_c);

  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(std::max(count, 1)));
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, description_, layout_a_, layout_b_, layout_c_, layout_c_, preference.get(),
                                     static_cast<int>(results.size()), results.data(), &found);
  std::vector<cublasLtMatmulAlgo_t> algorithms;
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return algorithms;  // none
  check_cublas(status, "cublasLtMatmulAlgoGetHeuristic");
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulHeuristicResult_t& result = results[static_cast<std::size_t>(i)];
    if (result.state == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_bytes) {
      algorithms.push_back(result.algo);
    }
  }
  return algorithms;
}

bool MatmulDescriptors::accepts(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algorithm,
                                std::size_t workspace_bytes) const {
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t status =
      cublasLtMatmulAlgoCheck(handle, description_, layout_a_, layout_b_, layout_c_, layout_c_, &algorithm, &result);
  return status == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_bytes;
}

cublasStatus_t MatmulDescriptors::run(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algorithm,
                                      const MatmulArguments& arguments, void* workspace, std::size_t workspace_bytes,
                                      cudaStream_t stream) const {
  if (has_bias_) {
    const cublasStatus_t status = cublasLtMatmulDescSetAttribute(description_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                 &arguments.bias, sizeof(arguments.bias));
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  if (has_aux_) {
    const cublasStatus_t status = cublasLtMatmulDescSetAttribute(
        description_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &arguments.aux, sizeof(arguments.aux));
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  return cublasLtMatmul(handle, description_, &arguments.alpha, arguments.a, layout_a_, arguments.b, layout_b_,
                        &arguments.beta, arguments.c, layout_c_, arguments.c, layout_c_, &algorithm, workspace,
                        workspace_bytes, stream);
}

MatmulAlgorithmConfig algorithm_config(const cublasLtMatmulAlgo_t& algorithm) {
  auto get = [&]<typename Value>(cublasLtMatmulAlgoConfigAttributes_t attribute, Value) {
    Value value{};
    std::size_t written = 0;
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algorithm, attribute, &value, sizeof(value), &written),
                 "cublasLtMatmulAlgoConfigGetAttribute");
    return value;
  };
  MatmulAlgorithmConfig config;
  config.id = get(CUBLASLT_ALGO_CONFIG_ID, std::int32_t{});
  config.tile = get(CUBLASLT_ALGO_CONFIG_TILE_ID, std::uint32_t{});
  config.stages = get(CUBLASLT_ALGO_CONFIG_STAGES_ID, std::uint32_t{});
  config.split_k = get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, std::int32_t{});
  config.reduction = get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, std::uint32_t{});
  config.swizzle = get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, std::uint32_t{});
  config.custom = get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, std::uint32_t{});
  config.inner_shape = get(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, std::uint16_t{});
  config.cluster_shape = get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, std::uint16_t{});
  return config;
}

MatmulPlan::MatmulPlan(cublasLtHandle_t handle, const MatmulShape& key, std::size_t workspace_bytes,
                       const MatmulAlgorithmChoice* recorded, const std::string& source)
    : descriptors_(key) {
  if (recorded != nullptr) {
    static_assert(sizeof(algorithm_.data) == sizeof(recorded->algorithm));
    std::memcpy(algorithm_.data, recorded->algorithm.data(), sizeof(algorithm_.data));
    // A hand-edited line, or words from another library build, must not run silently:
    // the readable columns have to describe the words, and cuBLASLt has to accept them.
    ADAMANT_CHECK(
        algorithm_config(algorithm_) == recorded->config && descriptors_.accepts(handle, algorithm_, workspace_bytes),
        "matmul algorithms file {}: cuBLASLt refuses the algorithm recorded for the {}x{}x{} product "
        "(transa {}, transb {}) on this GPU; record this GPU's choices again (adamant tune-matmul) or "
        "leave trainer.matmul_algorithms empty",
        source, key.m, key.n, key.k, key.transa, key.transb);
    supported_ = recorded_ = true;
    return;
  }
  const std::vector<cublasLtMatmulAlgo_t> first = descriptors_.candidates(handle, workspace_bytes, 1);
  if (first.empty()) return;  // no algorithm: supported_ stays false
  algorithm_ = first.front();
  supported_ = true;
}

namespace {

// "NVIDIA_H200/sm_90/132" for the current device.
std::string gpu_description(Device device) {
  cudaDeviceProp properties{};
  ADAMANT_CUDA_CHECK(cudaGetDeviceProperties(&properties, device.index));
  std::string name = properties.name;
  for (char& c : name) {
    if (c == ' ' || c == '\t') c = '_';
  }
  return fmt::format("{}/sm_{}{}/{}", name, properties.major, properties.minor, properties.multiProcessorCount);
}

}  // namespace

CublasLtContext::CublasLtContext(Device device, std::shared_ptr<const MatmulAlgorithmTable> algorithms)
    : workspace_(kWorkspaceBytes, device),
      target_{gpu_description(device), static_cast<std::uint64_t>(cublasLtGetVersion())},
      algorithms_(std::move(algorithms)) {
  check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
}

CublasLtContext::~CublasLtContext() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

bool CublasLtContext::try_matmul(const MatmulShape& key, const MatmulArguments& arguments, cudaStream_t stream) {
  // One lock over lookup and enqueue: a plan's descriptor holds the bias pointer of
  // the call being enqueued.
  const std::lock_guard lock(mutex_);
  PlanEntry& entry = plans_[key];
  if (!entry.plan) {
    const MatmulAlgorithmChoice* recorded = algorithms_ ? algorithms_->find(target_, key) : nullptr;
    try {
      entry.plan = std::make_unique<MatmulPlan>(handle_, key, kWorkspaceBytes, recorded,
                                                algorithms_ ? algorithms_->source() : std::string());
    } catch (...) {
      plans_.erase(key);  // no entry without a plan
      throw;
    }
  }
  entry.accumulates = entry.accumulates || arguments.beta != 0.0f;
  if (!entry.plan->supported()) return false;
  const cublasStatus_t status = entry.plan->run(handle_, arguments, workspace_.data(), workspace_.bytes(), stream);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  check_cublas(status, "cublasLtMatmul");
  return true;
}

std::vector<MatmulProblemSeen> CublasLtContext::problems() const {
  const std::lock_guard lock(mutex_);
  std::vector<MatmulProblemSeen> seen;
  for (const auto& [key, entry] : plans_) {
    if (entry.plan->supported()) seen.push_back({key, entry.accumulates});
  }
  return seen;
}

std::size_t CublasLtContext::recorded_plans() const {
  const std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const auto& [key, entry] : plans_) count += entry.plan->recorded() ? 1 : 0;
  return count;
}

}  // namespace adamant::kernels::cuda

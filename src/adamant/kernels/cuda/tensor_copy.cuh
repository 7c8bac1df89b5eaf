#pragma once
// Hopper's tensor-memory copies (TMA: cp.async.bulk.tensor, sm_90) and the shared-memory
// barriers (mbarrier) that count their bytes. One thread issues a whole tile's copy,
// which lands in the swizzled layout the warpgroup products read (wgmma.cuh),
// rows past the tensor's end as zeros; the other threads spend no instructions on it and
// wait on the tile's barrier instead of meeting at __syncthreads. Only for *.cu files.
//
// The host side encodes a map (CUtensorMap) of a [batch, seq, row] array of rows
// row_stride elements apart: a box is some rows of some columns of a row.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace adamant::kernels::cuda::detail {

// ---- host ----

// The driver's encoder, looked up once through the runtime (no link against libcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      function = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

// A map of rows [batch][seq] of row_elements elements each (element_bytes wide),
// row_stride elements apart, boxes of box_rows rows x box_columns; rows at or past seq
// (and columns past row_elements) read as zeros.
inline cudaError_t encode_rows_map(CUtensorMap& map, CUtensorMapDataType type, std::uint64_t element_bytes,
                                   const void* base, std::int64_t row_elements, std::int64_t row_stride, int seq,
                                   int batch, int box_columns, int box_rows, CUtensorMapSwizzle swizzle) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(row_stride) * element_bytes;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(row_elements), static_cast<cuuint64_t>(seq),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[2] = {row_bytes, row_bytes * static_cast<cuuint64_t>(seq)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_columns), static_cast<cuuint32_t>(box_rows), 1u};
  const cuuint32_t element_strides[3] = {1u, 1u, 1u};
  const CUresult result =
      encode(&map, type, 3, const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// bf16 rows (row_stride a multiple of 8), boxes of box_rows rows x one panel of
// panel_columns (64, 32 or 16) swizzled by its width in bytes, as the warpgroup products
// read them.
inline cudaError_t encode_token_rows_map(CUtensorMap& map, const std::uint16_t* base, std::int64_t row_elements,
                                         std::int64_t row_stride, int seq, int batch, int box_rows, int panel_columns) {
  if (panel_columns != 64 && panel_columns != 32 && panel_columns != 16) return cudaErrorInvalidValue;
  const CUtensorMapSwizzle swizzle = panel_columns == 64   ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : panel_columns == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                           : CU_TENSOR_MAP_SWIZZLE_32B;
  return encode_rows_map(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, row_elements, row_stride, seq, batch,
                         panel_columns, box_rows, swizzle);
}

// fp32 rows (row_stride a multiple of 4), boxes of box_rows rows x box_columns (a
// multiple of 4) laid out plainly.
inline cudaError_t encode_fp32_rows_map(CUtensorMap& map, const void* base, std::int64_t row_elements,
                                        std::int64_t row_stride, int seq, int batch, int box_columns, int box_rows) {
  return encode_rows_map(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, base, row_elements, row_stride, seq, batch,
                         box_columns, box_rows, CU_TENSOR_MAP_SWIZZLE_NONE);
}

// ---- device ----

__device__ __forceinline__ std::uint32_t barrier_address(const std::uint64_t* barrier) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(barrier));
}
// A barrier whose phase completes after `arrivals` arrivals and all bytes it expects.
__device__ __forceinline__ void barrier_init(std::uint64_t* barrier, std::uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier_address(barrier)), "r"(arrivals) : "memory");
}
// Makes initialised barriers visible to the async proxy (the copies' byte counts);
// a __syncthreads after it makes them visible to the other threads.
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also tells the barrier to wait for `bytes` more of copies.
__device__ __forceinline__ void barrier_arrive_expecting(std::uint64_t* barrier, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier_address(barrier)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void barrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier_address(barrier)) : "memory");
}
// Waits until the barrier's phase of the given parity (0 for its first phase, then
// alternating) has completed.
__device__ __forceinline__ void barrier_wait(std::uint64_t* barrier, std::uint32_t parity) {
  const std::uint32_t address = barrier_address(barrier);
  std::uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(address), "r"(parity)
                 : "memory");
  } while (done == 0);
}

// Starts copying box (column, row, sample) of `map` into shared memory at `tile` (1024-byte
// aligned), completing its bytes on `barrier`.
__device__ __forceinline__ void copy_box_async(unsigned char* tile, const CUtensorMap* map, int column, int row,
                                               int sample, std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(tile))),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(column), "r"(row), "r"(sample), "r"(barrier_address(barrier))
      : "memory");
}

// Starts copying kBytes (a multiple of 16) from global `source` (16-byte aligned) into
// shared memory at `destination` (16-byte aligned), completing them on `barrier`.
template <std::uint32_t kBytes>
__device__ __forceinline__ void copy_bytes_async(unsigned char* destination, const unsigned char* source,
                                                 std::uint64_t* barrier) {
  static_assert(kBytes % 16 == 0, "bulk copies move whole 16-byte units");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   static_cast<std::uint32_t>(__cvta_generic_to_shared(destination))),
               "l"(source), "n"(kBytes), "r"(barrier_address(barrier))
               : "memory");
}

// The same, with an L2 cache policy (createpolicy) for the bytes read.
template <std::uint32_t kBytes>
__device__ __forceinline__ void copy_bytes_async(unsigned char* destination, const unsigned char* source,
                                                 std::uint64_t* barrier, std::uint64_t policy) {
  static_assert(kBytes % 16 == 0, "bulk copies move whole 16-byte units");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::
          "r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(destination))),
      "l"(source), "n"(kBytes), "r"(barrier_address(barrier)), "l"(policy)
      : "memory");
}

// Publishes this thread's ordinary writes to shared memory (stores, stmatrix, cp.async) to the
// async proxy, which the bulk copies back and the warpgroup products (wgmma.cuh) read it through.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// An L2 policy for data read or written once (streamed optimizer state, score gradients that
// only the next kernel reads): it leaves L2 first, before data that is read again.
__device__ __forceinline__ std::uint64_t evict_first_policy() {
  std::uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// Copies back: kBytes (a multiple of 16) from shared memory at address `source` (16-byte
// aligned) to global `destination` (16-byte aligned) with an L2 policy, in this thread's current
// bulk group. A thread commits its copies as a group, then waits until its groups but the
// newest kPending have read their shared sources (the memory may be written again), or until
// all are done (before the kernel ends).
template <std::uint32_t kBytes>
__device__ __forceinline__ void store_bytes_async(unsigned char* destination, std::uint32_t source,
                                                  std::uint64_t policy) {
  static_assert(kBytes % 16 == 0, "bulk copies move whole 16-byte units");
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;\n" ::"l"(destination),
               "r"(source), "n"(kBytes), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void commit_stores() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait_stores_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void wait_stores_done() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

}  // namespace adamant::kernels::cuda::detail

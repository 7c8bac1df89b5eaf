#pragma once
// Hopper's warpgroup tensor-core products (wgmma.mma_async, sm_90a) for the flash
// attention kernels: bf16 operands, fp32 accumulators, operands read straight from
// shared memory through matrix descriptors. Only for *.cu files.
//
// Swizzled tiles. A tile of kRows rows x kCols bf16 columns is panels one after the
// other, each kRows rows of one of Hopper's swizzle widths: 128 bytes (64 columns) where
// kCols is a multiple of 64 (head sizes 64 and 128, and the 64-key score tiles), else 64
// bytes (32 columns: head size 96) or 32 bytes (16 columns: head size 80), the widest that
// divides the row, as one swizzle mode serves a whole operand. Within a panel of W-byte
// rows the 16-byte chunk c of row r sits at r W + (c ^ ((r W / 128) mod (W / 16))) 16: the
// hardware's swizzle, which spreads the eight rows of a core matrix over all 32 banks and
// repeats every 8 rows, so every panel starts on an 8 W-byte boundary (the tiles sit on
// 1024-byte ones). The same tile serves as a K-major operand (rows are M or N, columns are
// k: a k16 step is 32 bytes into a panel) and as an MN-major one (rows are k, columns are
// N: a k16 step is 16 rows).
//
// Accumulators. In each warp w of the warpgroup, the fp32 D of an m64nN product holds
// rows 16 w .. 16 w + 15 exactly as N / 8 mma.sync m16n8 C tiles do
// (flash_attention_tiles.cuh: c[t][0..1] row `group`, c[t][2..3] row `group + 8`,
// columns 8 t + 2 pair + {0, 1}); an A operand in registers is the warp's 16 rows as one
// mma.sync A fragment, so a_from_c turns two C tiles into the next product's A.
//
// Ordering. Shared memory written by ordinary stores or cp.async must be published to
// the tensor cores' (async) proxy with detail::fence_async_shared() (tensor_copy.cuh) before the barrier that
// precedes the products; products are issued after wgmma_fence(), committed as a
// group and waited for, and fence_accumulators() keeps the compiler from touching the
// accumulators between issue and wait.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_detail {

// Columns of one panel of a tile kCols wide; the host encodes its tensor maps with it too.
constexpr int swizzle_panel_columns(int columns) { return columns % 64 == 0 ? 64 : columns % 32 == 0 ? 32 : 16; }
constexpr std::size_t kSwizzleAlignment = 1024;

template <int kCols>
struct Panels {
  static_assert(kCols % 16 == 0, "swizzled tiles are whole 32-byte rows");
  static constexpr int kColumns = swizzle_panel_columns(kCols);
  static constexpr int kCount = kCols / kColumns;
  static constexpr std::uint32_t kRowBytes = 2 * kColumns;  // the swizzle's width
  static constexpr int kChunks = static_cast<int>(kRowBytes / 16);
  static constexpr int kStepsPerPanel = static_cast<int>(kRowBytes / 32);  // k16 steps of a K-major row
  static constexpr std::uint32_t kCoreGroupBytes = 8 * kRowBytes;          // eight rows: one swizzle pattern
  // The descriptors' layout type: 1 for 128-byte swizzling, 2 for 64, 3 for 32.
  static constexpr std::uint32_t kLayoutType = kRowBytes == 128 ? 1u : kRowBytes == 64 ? 2u : 3u;
  template <int kRows>
  static constexpr std::uint32_t bytes() {  // one panel
    static_assert(kRows % 8 == 0, "swizzled tiles are whole core groups");
    return static_cast<std::uint32_t>(kRows) * kRowBytes;
  }
};

template <int kCols, int kRows>
constexpr std::size_t swizzled_tile_bytes() {
  return static_cast<std::size_t>(Panels<kCols>::kCount) * Panels<kCols>::template bytes<kRows>();
}

// Byte offset of 16-byte chunk `chunk` (columns 8 chunk .. 8 chunk + 7) of row `row`.
template <int kCols, int kRows>
__device__ __forceinline__ std::uint32_t swizzled_chunk_offset(int row, int chunk) {
  using P = Panels<kCols>;
  const int pattern = (row * static_cast<int>(P::kRowBytes) / 128) % P::kChunks;
  return static_cast<std::uint32_t>(chunk / P::kChunks) * P::template bytes<kRows>() +
         static_cast<std::uint32_t>(row) * P::kRowBytes +
         static_cast<std::uint32_t>(((chunk % P::kChunks) ^ pattern) * 16);
}

// A matrix descriptor of a tile kCols wide: the operand's start (`offset` bytes into
// the tile at shared address `tile`), the byte distance between its panels (used by
// MN-major operands wider than one panel) and between its 8-row core groups, and the
// swizzle. The start field counts 16-byte units and shared addresses stay below 2^18
// bytes, so the offset is added after the shift: every operand of a tile then shares
// `tile >> 4` and costs one add, not a shift, mask and pack of its own.
template <int kCols>
__device__ __forceinline__ std::uint64_t swizzled_descriptor(std::uint32_t tile, std::uint32_t offset,
                                                             std::uint32_t panel_stride) {
  using P = Panels<kCols>;
  constexpr std::uint32_t kHigh = (P::kCoreGroupBytes >> 4) | (P::kLayoutType << 30);
  const std::uint32_t low = ((tile & 0x3ffffu) >> 4) + (offset >> 4) + ((panel_stride >> 4) << 16);
  return (static_cast<std::uint64_t>(kHigh) << 32) | low;
}
// K-major operand: rows [first_row, first_row + 64) (A) or the whole N (B) of a swizzled
// tile kCols wide and kRows high, k columns [16 k16, 16 k16 + 16).
template <int kCols, int kRows>
__device__ __forceinline__ std::uint64_t k_major(std::uint32_t tile, int first_row, int k16) {
  using P = Panels<kCols>;
  return swizzled_descriptor<kCols>(tile,
                                    static_cast<std::uint32_t>(k16 / P::kStepsPerPanel) * P::template bytes<kRows>() +
                                        static_cast<std::uint32_t>(first_row) * P::kRowBytes +
                                        static_cast<std::uint32_t>(k16 % P::kStepsPerPanel) * 32u,
                                    16u);
}
// MN-major operand: k rows [16 k16, 16 k16 + 16) of a swizzled tile kCols wide and kRows
// high, all its columns as N (a B operand) or as M (an A operand, 64 columns).
template <int kCols, int kRows>
__device__ __forceinline__ std::uint64_t mn_major(std::uint32_t tile, int k16) {
  using P = Panels<kCols>;
  return swizzled_descriptor<kCols>(tile, static_cast<std::uint32_t>(16 * k16) * P::kRowBytes,
                                    P::template bytes<kRows>());
}

// store_warp_rows_staged (flash_attention_tiles.cuh) through rows [tile_row, tile_row + 16)
// of a swizzled tile of kRows rows.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void store_warp_rows_swizzled(const float (&acc)[kHeadDim / 8][4], float scale_row0,
                                                         float scale_row1, unsigned char* tile, int tile_row,
                                                         std::uint16_t* dst, std::int64_t row_stride, int first_row,
                                                         int seq, float* column_sums = nullptr) {
  store_warp_rows_staged<kHeadDim>(
      acc, scale_row0, scale_row1, tile,
      [=](int r, int c) { return swizzled_chunk_offset<kHeadDim, kRows>(tile_row + r, c); }, dst, row_stride, first_row,
      seq, column_sums);
}

// The 64 rows of a block (queries or keys) a warpgroup owns: the warps 4 w .. 4 w + 3 of
// warpgroup w hold rows first .. first + 63 of the block's kBlockRows, 16 each.
constexpr int kGroupRows = 64;
struct WarpgroupRows {
  __device__ WarpgroupRows(int warp, int block_first, int seq)
      // Broadcast from lane 0, so that the compiler knows the index (and all that
      // follows from it) is the same across the warp.
      : index(__shfl_sync(0xffffffffu, warp / 4, 0)),
        first(block_first + index * kGroupRows),
        last(first + kGroupRows - 1),
        active(first < seq) {}
  int index, first, last;
  bool active;  // some row exists
};

// The four fp32 accumulators of n8 tile t of d as asm operands, read and written (INOUT)
// or written only (OUT): the products' operand lists name every accumulator register.
#define ADAMANT_WGMMA_TILE_INOUT(d, t) "+f"(d[t][0]), "+f"(d[t][1]), "+f"(d[t][2]), "+f"(d[t][3])
#define ADAMANT_WGMMA_TILE_OUT(d, t) "=f"(d[t][0]), "=f"(d[t][1]), "=f"(d[t][2]), "=f"(d[t][3])
#define ADAMANT_WGMMA_EIGHT_TILES(TILE, d, first)                                                               \
  TILE(d, (first) + 0), TILE(d, (first) + 1), TILE(d, (first) + 2), TILE(d, (first) + 3), TILE(d, (first) + 4), \
      TILE(d, (first) + 5), TILE(d, (first) + 6), TILE(d, (first) + 7)

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
template <int kTiles>
__device__ __forceinline__ void fence_accumulators(float (&d)[kTiles][4]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[t][e])::"memory");
  }
}

// d = a . b, m64n64k16, both K-major in shared memory: the first k step of a product,
// which reads nothing of d (so that d is not carried from one product to the next).
__device__ __forceinline__ void mma_shared_a_first(float (&d)[8][4], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_OUT, d, 0)
      : "l"(a), "l"(b));
}
// d += a . b, m64n64k16, both operands in shared memory: K-major (kTranspose 0) or both
// MN-major (1: a's 16 k rows hold its 64 M as columns, b's its 64 N).
template <int kTranspose>
__device__ __forceinline__ void mma_shared(float (&d)[8][4], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, 1, 1, 1, %34, %34;\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0)
      : "l"(a), "l"(b), "n"(kTranspose));
}
__device__ __forceinline__ void mma_shared_a(float (&d)[8][4], std::uint64_t a, std::uint64_t b) {
  mma_shared<0>(d, a, b);
}
// d += a . b, m64nNk16 for N a head size, both operands MN-major in shared memory: a's 16 k
// rows hold its 64 M as columns, b's its N.
template <int kN>
__device__ void mma_shared_mn(float (&d)[kN / 8][4], std::uint64_t a, std::uint64_t b);
template <>
__device__ __forceinline__ void mma_shared_mn<64>(float (&d)[8][4], std::uint64_t a, std::uint64_t b) {
  mma_shared<1>(d, a, b);
}
template <>
__device__ __forceinline__ void mma_shared_mn<80>(float (&d)[10][4], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, "
      "%40, %41, 1, 1, 1, 1, 1;\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0), ADAMANT_WGMMA_TILE_INOUT(d, 8),
        ADAMANT_WGMMA_TILE_INOUT(d, 9)
      : "l"(a), "l"(b));
}
template <>
__device__ __forceinline__ void mma_shared_mn<96>(float (&d)[12][4], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47}, "
      "%48, %49, 1, 1, 1, 1, 1;\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0), ADAMANT_WGMMA_TILE_INOUT(d, 8),
        ADAMANT_WGMMA_TILE_INOUT(d, 9), ADAMANT_WGMMA_TILE_INOUT(d, 10), ADAMANT_WGMMA_TILE_INOUT(d, 11)
      : "l"(a), "l"(b));
}
template <>
__device__ __forceinline__ void mma_shared_mn<128>(float (&d)[16][4], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "
      "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63}, "
      "%64, %65, 1, 1, 1, 1, 1;\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0),
        ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 8)
      : "l"(a), "l"(b));
}

// d = a b^T, m64n64 over k = kCols: rows [a_first_row, a_first_row + 64) of swizzled
// tile a (kRowsA rows) times the kStreamRows (64) rows of swizzled tile b, both K-major
// and kCols wide.
template <int kCols, int kRowsA>
__device__ __forceinline__ void mma_rows_by_rows(float (&d)[8][4], std::uint32_t a_tile, int a_first_row,
                                                 std::uint32_t b_tile) {
  mma_shared_a_first(d, k_major<kCols, kRowsA>(a_tile, a_first_row, 0), k_major<kCols, kStreamRows>(b_tile, 0, 0));
#pragma unroll
  for (int kk = 1; kk < kCols / 16; ++kk)
    mma_shared_a(d, k_major<kCols, kRowsA>(a_tile, a_first_row, kk), k_major<kCols, kStreamRows>(b_tile, 0, kk));
}

template <int kN>
__device__ void mma_register_a(float (&d)[kN / 8][4], const std::uint32_t (&a)[4], std::uint64_t b);

// d += a . b, m64n64k16: a (64 x 16) in registers, b (16 x 64) MN-major in shared memory.
template <>
__device__ __forceinline__ void mma_register_a<64>(float (&d)[8][4], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// d += a . b, m64n80k16: a (64 x 16) in registers, b (16 x 80) MN-major in shared memory.
template <>
__device__ __forceinline__ void mma_register_a<80>(float (&d)[10][4], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %45, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}, "
      "{%40, %41, %42, %43}, %44, p, 1, 1, 1;\n}\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0), ADAMANT_WGMMA_TILE_INOUT(d, 8),
        ADAMANT_WGMMA_TILE_INOUT(d, 9)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// d += a . b, m64n96k16: a (64 x 16) in registers, b (16 x 96) MN-major in shared memory.
template <>
__device__ __forceinline__ void mma_register_a<96>(float (&d)[12][4], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47}, "
      "{%48, %49, %50, %51}, %52, p, 1, 1, 1;\n}\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0), ADAMANT_WGMMA_TILE_INOUT(d, 8),
        ADAMANT_WGMMA_TILE_INOUT(d, 9), ADAMANT_WGMMA_TILE_INOUT(d, 10), ADAMANT_WGMMA_TILE_INOUT(d, 11)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// d += a . b, m64n128k16: a (64 x 16) in registers, b (16 x 128) MN-major in shared memory.
template <>
__device__ __forceinline__ void mma_register_a<128>(float (&d)[16][4], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 0),
        ADAMANT_WGMMA_EIGHT_TILES(ADAMANT_WGMMA_TILE_INOUT, d, 8)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// d += a b, m64nN over k = 16 kSteps: A fragments in registers (one per k16 step: the
// warp's 16 rows) times rows [16 kk, 16 kk + 16) of a swizzled tile of kRows rows, MN-major.
template <int kN, int kSteps, int kRows>
__device__ __forceinline__ void mma_fragments_by_columns(float (&d)[kN / 8][4], const std::uint32_t (&a)[kSteps][4],
                                                         std::uint32_t b_tile) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) mma_register_a<kN>(d, a[kk], mn_major<kN, kRows>(b_tile, kk));
}

#undef ADAMANT_WGMMA_EIGHT_TILES
#undef ADAMANT_WGMMA_TILE_OUT
#undef ADAMANT_WGMMA_TILE_INOUT

}  // namespace adamant::kernels::cuda::flash_detail

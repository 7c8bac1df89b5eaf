// Memset nodes of a CUDA graph rewritten as kernels (core/graph_memsets.h) against the
// bytes the memsets write, computed on the host: 1-, 2- and 4-byte elements (written in
// wider units where aligned), rows with a pitch whose padding must stay untouched, and
// the order of the nodes around them (a copy that depends on the last memset sees every
// fill).
#include "adamant/core/graph_memsets.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/gpu.h"

namespace adamant {
namespace {

constexpr std::size_t kBytes = 4096;
constexpr unsigned char kBefore = 0xab;

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

struct MemsetCase {
  std::size_t offset, pitch, width, height;
  unsigned element_size, value;
};

// What cudaMemset2D-style memsets write, on the host.
void apply(std::vector<unsigned char>& bytes, const MemsetCase& m) {
  for (std::size_t row = 0; row < m.height; ++row) {
    for (std::size_t column = 0; column < m.width; ++column) {
      unsigned char* element = bytes.data() + m.offset + row * m.pitch + column * m.element_size;
      const std::uint32_t value = m.value;
      std::memcpy(element, &value, m.element_size);  // little-endian: the low element_size bytes
    }
  }
}

std::size_t count_nodes(cudaGraph_t graph, cudaGraphNodeType wanted) {
  std::size_t count = 0;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) {
    EXPECT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
  }
  std::size_t matching = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    EXPECT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
    matching += type == wanted ? 1 : 0;
  }
  return matching;
}

TEST(GraphMemsets, KernelsWriteWhatTheMemsetsWouldInTheSameOrder) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<MemsetCase> cases = {
      {3, 0, 101, 1, 1, 0x5c},           // bytes, one row
      {512, 64, 9, 5, 4, 0x01020304},    // 4-byte elements, rows 64 bytes apart
      {1026, 70, 11, 3, 2, 0xbeef},      // 2-byte elements at an odd pitch
      {2048, 0, 300, 1, 4, 0xffffffff},  // 16-byte aligned: written 16 bytes at a time
      {1280, 0, 6, 1, 2, 0x1234},        // 2-byte elements written 4 bytes at a time
      {3328, 0, 512, 1, 1, 0x11},        // bytes written 16 at a time
  };
  unsigned char *filled = nullptr, *copy = nullptr;
  CHECK_CUDA(cudaMalloc(&filled, kBytes));
  CHECK_CUDA(cudaMalloc(&copy, kBytes));
  CHECK_CUDA(cudaMemset(filled, kBefore, kBytes));
  CHECK_CUDA(cudaMemset(copy, 0, kBytes));

  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t previous = nullptr;
  std::vector<unsigned char> expected(kBytes, kBefore);
  for (const MemsetCase& m : cases) {
    cudaMemsetParams params{};
    params.dst = filled + m.offset;
    params.pitch = m.pitch;
    params.value = m.value;
    params.elementSize = m.element_size;
    params.width = m.width;
    params.height = m.height;
    cudaGraphNode_t node = nullptr;
    CHECK_CUDA(
        cudaGraphAddMemsetNode(&node, graph, previous == nullptr ? nullptr : &previous, previous ? 1 : 0, &params));
    previous = node;
    apply(expected, m);
  }
  cudaGraphNode_t copy_node = nullptr;
  CHECK_CUDA(cudaGraphAddMemcpyNode1D(&copy_node, graph, &previous, 1, copy, filled, kBytes, cudaMemcpyDeviceToDevice));

  ASSERT_EQ(count_nodes(graph, cudaGraphNodeTypeMemset), cases.size());
  CHECK_CUDA(replace_memsets_with_kernels(graph));
  EXPECT_EQ(count_nodes(graph, cudaGraphNodeTypeMemset), 0u);
  EXPECT_EQ(count_nodes(graph, cudaGraphNodeTypeKernel), cases.size());
  EXPECT_EQ(count_nodes(graph, cudaGraphNodeTypeMemcpy), 1u);

  cudaGraphExec_t executable = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&executable, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(executable, nullptr));
  CHECK_CUDA(cudaStreamSynchronize(nullptr));
  std::vector<unsigned char> filled_host(kBytes), copy_host(kBytes);
  CHECK_CUDA(cudaMemcpy(filled_host.data(), filled, kBytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(copy_host.data(), copy, kBytes, cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(filled_host[i], expected[i]) << "byte " << i << " of the filled buffer";
    ASSERT_EQ(copy_host[i], expected[i]) << "byte " << i << " of the copy that follows the fills";
  }
  cudaGraphExecDestroy(executable);
  cudaGraphDestroy(graph);
  cudaFree(filled);
  cudaFree(copy);
}

TEST(GraphMemsets, GraphsWithoutMemsetsStayAsTheyAre) {
  ADAMANT_REQUIRE_GPU();
  unsigned char *from = nullptr, *to = nullptr;
  CHECK_CUDA(cudaMalloc(&from, kBytes));
  CHECK_CUDA(cudaMalloc(&to, kBytes));
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t node = nullptr;
  CHECK_CUDA(cudaGraphAddMemcpyNode1D(&node, graph, nullptr, 0, to, from, kBytes, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(replace_memsets_with_kernels(graph));
  EXPECT_EQ(count_nodes(graph, cudaGraphNodeTypeMemcpy), 1u);
  EXPECT_EQ(count_nodes(graph, cudaGraphNodeTypeKernel), 0u);
  cudaGraphDestroy(graph);
  cudaFree(from);
  cudaFree(to);
}

}  // namespace
}  // namespace adamant

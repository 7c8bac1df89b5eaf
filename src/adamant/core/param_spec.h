#pragma once
// The parameter list as plain data: what the optimizer needs to know about the
// model's weights, without knowing the model. Produced once by model/ParamLayout.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace adamant {

struct ParamSpec {
  std::string name;  // e.g. "layers.3.attn.qkv.weight"
  std::vector<std::int64_t> shape;
  std::size_t numel = 0;
  std::size_t offset = 0;     // element offset in the flat weight/grad buffers
  bool weight_decay = true;   // false for biases and layernorm weights
  bool tp_duplicate = false;  // replicated across tensor-parallel ranks (count once in the norm)
  // A copy of a parameter that another pipeline stage owns (the last stage's tied word embedding):
  // its gradient is summed with the owner's, and it counts once in the norm and in checkpoints.
  bool tied_copy = false;
};

// Parameters in flat-buffer order. The model lays them out in reverse order of
// first use in forward (last layer first), which is the order gradients become
// final in backward; the optimizer's buckets follow that order.
struct ParamList {
  std::vector<ParamSpec> params;
  std::size_t total_numel = 0;

  std::size_t size() const { return params.size(); }
  const ParamSpec& operator[](std::size_t i) const { return params[i]; }
  std::size_t index_of(const std::string& name) const;  // throws if absent
};

}  // namespace adamant

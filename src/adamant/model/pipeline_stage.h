#pragma once
// Which layers a pipeline rank holds (model.pipeline_model_parallel_size p stages,
// model.virtual_pipeline_model_parallel_size v chunks per stage), as Megatron splits them:
// the layers form p * v equal virtual stages in order, and chunk c of stage s is virtual
// stage c * p + s. The first virtual stage also holds the word and position embeddings, the
// last one the final layernorm and the classifier. The classifier reads the word embedding
// (tied weights): with p > 1 the last stage holds a copy of it, initialised alike, whose
// gradient the trainer sums with the first stage's before each update, so the two copies stay
// equal.
#include <vector>

#include "adamant/model/gpt_config.h"

namespace adamant::model {

struct ModelChunk {
  int virtual_stage = 0;
  int first_layer = 0;  // global layer number of its first layer
  int num_layers = 0;
  bool has_embedding = false;  // word and position embeddings at its input
  bool has_head = false;       // final layernorm and classifier at its output
};

struct PipelineStage {
  int stage = 0;
  int stages = 1;
  std::vector<ModelChunk> chunks;  // chunk c is virtual stage c * stages + stage

  bool first() const { return stage == 0; }
  bool last() const { return stage + 1 == stages; }
  // The last stage of a pipeline of two or more holds a copy of the first stage's word embedding.
  bool holds_tied_copy() const { return stages > 1 && last(); }
};

// Stage `stage` of config.pipeline_parallel_size (validated config; 0 <= stage < stages).
PipelineStage pipeline_stage(const GptConfig& config, int stage);

}  // namespace adamant::model

#include "adamant/model/pipeline_stage.h"

#include "adamant/core/error.h"

namespace adamant::model {

PipelineStage pipeline_stage(const GptConfig& config, int stage) {
  config.validate();
  const int stages = config.pipeline_parallel_size;
  const int virtual_stages = stages * config.virtual_pipeline_size;
  ADAMANT_CHECK(stage >= 0 && stage < stages, "pipeline stage {} of model.pipeline_model_parallel_size {}", stage,
                stages);
  PipelineStage out;
  out.stage = stage;
  out.stages = stages;
  const int layers = config.num_layers / virtual_stages;
  for (int c = 0; c < config.virtual_pipeline_size; ++c) {
    ModelChunk chunk;
    chunk.virtual_stage = c * stages + stage;
    chunk.first_layer = chunk.virtual_stage * layers;
    chunk.num_layers = layers;
    chunk.has_embedding = chunk.virtual_stage == 0;
    chunk.has_head = chunk.virtual_stage + 1 == virtual_stages;
    out.chunks.push_back(chunk);
  }
  return out;
}

}  // namespace adamant::model

# The GPT model on a GPU against the CPU model (label gpu: CPU-only CI skips it).
adamant_gpu_test(NAME gpu_model_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu_model_test.cpp
                 LIBS adamant_model)
# Tensor and sequence parallelism over 2 GPUs (NCCL) against the whole model.
adamant_gpu_test(NAME gpu_tensor_parallel_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu_tensor_parallel_test.cpp
                 NP 2
                 LIBS adamant_model)
# The key/value-cache decoder and the decoding kernels on a GPU against the CPU.
adamant_gpu_test(NAME gpu_decoder_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu_decoder_test.cpp
                 LIBS adamant_model)
# Pipeline stages on one GPU (activations and gradients handed from stage to stage) against the whole model.
adamant_gpu_test(NAME gpu_pipeline_stage_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpu_pipeline_stage_test.cpp
                 LIBS adamant_model)

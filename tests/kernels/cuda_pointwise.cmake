# CUDA layernorm, GELU and dropout (also with a bias gradient), residual add (also fused
# with the layernorm after it) and embeddings (also over vocabulary slices) against the
# CPU reference kernels (label gpu: CI skips them).
adamant_gpu_test(NAME cuda_pointwise_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_pointwise_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_embedding_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_bias_grad_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_residual_layernorm_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_vocab_parallel_embedding_test.cpp
                 LIBS adamant_kernels)

# CUDA causal attention against the CPU reference kernel (label gpu: CI skips it).
adamant_gpu_test(NAME cuda_attention_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_attention_test.cpp
                 LIBS adamant_kernels)

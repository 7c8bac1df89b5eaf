# CUDA optimizer kernels against the CPU reference kernels (label gpu: CI skips them).
adamant_gpu_test(NAME cuda_kernels_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_adam_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_reduce_elementwise_test.cpp
                 LIBS adamant_kernels)

# CUDA GEMM, linear layer (and with its GELU epilogues), softmax cross-entropy and fused classifier against the
# CPU reference kernels (label gpu: CI skips them).
adamant_gpu_test(NAME cuda_gemm_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_linear_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_classifier_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_matmul_algorithms_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_linear_gelu_test.cpp
                 LIBS adamant_kernels)

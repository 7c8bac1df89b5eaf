# CUDA flash attention against the CPU attention kernels, and the QKV bias gradient its backward
# sums (label gpu: CI skips it).
adamant_gpu_test(NAME cuda_flash_attention_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_flash_attention_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_flash_attention_bias_test.cpp
                 LIBS adamant_kernels)

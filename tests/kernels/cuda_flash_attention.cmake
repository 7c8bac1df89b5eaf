# CUDA flash attention against the CPU attention kernels (label gpu: CI skips it).
adamant_gpu_test(NAME cuda_flash_attention_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_flash_attention_test.cpp
                 LIBS adamant_kernels)

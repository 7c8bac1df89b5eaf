# Every CPU kernel test file (cuda_* files are the GPU tests, optimizer_kernels_test.cpp has
# its own executable), so that a new kernel's test needs no entry here.
file(GLOB model_kernel_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cpp)
list(FILTER model_kernel_tests EXCLUDE REGEX "/(cuda_[^/]*|optimizer_kernels_test)\\.cpp$")
adamant_test(NAME model_kernels_tests SOURCES ${model_kernel_tests} LIBS adamant_kernels)

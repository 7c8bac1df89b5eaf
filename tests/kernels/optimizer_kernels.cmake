adamant_test(NAME optimizer_kernels_tests SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/optimizer_kernels_test.cpp
             LIBS adamant_kernels)

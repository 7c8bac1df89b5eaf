# The key/value-cache decoder and its kernels on the CPU.
adamant_test(NAME decoder_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gpt_decoder_test.cpp
  LIBS adamant_model)

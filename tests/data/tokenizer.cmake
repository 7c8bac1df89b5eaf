adamant_test(NAME tokenizer_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bpe_tokenizer_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_pieces_test.cpp
  LIBS adamant_data)

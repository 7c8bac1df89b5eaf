# Indexed datasets, the GPT dataset, blending and the data-parallel loader: no tokenizer needed.
adamant_test(NAME dataset_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/indexed_dataset_test.cpp ${CMAKE_CURRENT_LIST_DIR}/gpt_dataset_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/gpt_datasets_test.cpp ${CMAKE_CURRENT_LIST_DIR}/blended_dataset_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/loader_test.cpp
  LIBS adamant_data LABELS data)
# `adamant preprocess` end to end; needs the GPT-2 vocabulary from scripts/fetch_data.sh.
adamant_test(NAME preprocess_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/preprocess_test.cpp LIBS adamant_data LABELS data)

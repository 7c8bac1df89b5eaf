# Hugging Face GPT-2 folders: export/import round trips and errors, and fine-tuning from a folder.
adamant_test(NAME hf_gpt2_folder_tests SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/hf_gpt2_folder_test.cpp LIBS adamant_train)
adamant_mpi_test(NAME hf_finetune_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/hf_finetune_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test_util.cpp
  NP 2 LIBS adamant_train)

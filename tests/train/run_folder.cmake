# What a run does to its folder: checkpoints owned by their run, resumption that follows
# `latest` and falls back past damage, leftovers of interrupted saves, metrics of re-run steps.
adamant_mpi_test(NAME trainer_run_folder_mpi_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/run_folder_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test_util.cpp
  NP 1 2 LIBS adamant_train)

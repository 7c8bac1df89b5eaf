# TensorBoard event files of a run, read back by an independent Python reader.
adamant_mpi_test(NAME tensorboard_mpi_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/tensorboard_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test_util.cpp
  NP 2 LIBS adamant_train)
target_compile_definitions(tensorboard_mpi_tests PRIVATE
  ADAMANT_TENSORBOARD_READER="${CMAKE_CURRENT_SOURCE_DIR}/tensorboard_events.py")

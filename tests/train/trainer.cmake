# End-to-end training tests (tiny model, random tokens) under mpirun.
adamant_mpi_test(NAME trainer_mpi_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/trainer_mpi_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test_util.cpp
  NP 1 2 3 4 8 LIBS adamant_train)
# Pipeline stages (1F1B, interleaved, with data and tensor parallelism) against one rank.
adamant_mpi_test(NAME trainer_pipeline_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/trainer_pipeline_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test_util.cpp
  NP 2 4 8 LIBS adamant_train)

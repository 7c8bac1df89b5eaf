# What a run reports (exposed communication, peak memory) under mpirun.
adamant_mpi_test(NAME trainer_metrics_mpi_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/trainer_metrics_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/benchmark_test.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test_util.cpp
  NP 1 2 LIBS adamant_train)

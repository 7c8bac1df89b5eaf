# trainer.devices / trainer.num_nodes against the MPI world, under mpirun.
adamant_mpi_test(NAME trainer_launch_tests
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/trainer_launch_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/trainer_test_util.cpp
  NP 1 2 LIBS adamant_train)
target_link_libraries(trainer_launch_tests PRIVATE GTest::gmock)

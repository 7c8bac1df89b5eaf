# Exposed communication time; a rank is delayed on purpose, so only small rank counts.
adamant_mpi_test(NAME optim_comm_timing_mpi_tests
                 SOURCES comm_timing_test.cpp mpi_test_helpers.cpp synthetic_model.cpp
                 NP 2 3
                 LIBS adamant_optim)

# Exposed communication time with NCCL on 2 GPUs (one per rank). Labelled gpu.
adamant_gpu_test(NAME optim_cuda_comm_timing_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_comm_timing_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_backend_run.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/mpi_test_helpers.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/synthetic_model.cpp
                 NP 2 ONE_GPU_PER_RANK
                 LIBS adamant_optim)
if(TARGET optim_cuda_comm_timing_tests)
  set_tests_properties(optim_cuda_comm_timing_tests PROPERTIES TIMEOUT 120)
endif()

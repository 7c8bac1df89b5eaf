# FusedAdam and DistributedFusedAdam on GPU buffers (NCCL) against host buffers (MPI):
# 2 ranks, one GPU each (node-local rank). Labelled gpu, so CPU-only CI skips it.
adamant_gpu_test(NAME optim_cuda_tests
                 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cuda_optimizer_test.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/cuda_backend_run.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/mpi_test_helpers.cpp
                         ${CMAKE_CURRENT_SOURCE_DIR}/synthetic_model.cpp
                 NP 2 ONE_GPU_PER_RANK
                 LIBS adamant_optim)
if(TARGET optim_cuda_tests)
  # A rank failing alone would leave the other waiting in a collective: end the run instead of stalling.
  set_tests_properties(optim_cuda_tests PROPERTIES TIMEOUT 300)
endif()

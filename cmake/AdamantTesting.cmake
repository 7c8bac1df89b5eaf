# Test helpers. Every module's tests/<module>/CMakeLists.txt uses these.
#
# LIBS names the module libraries a test links (default: adamant, i.e. all);
# linking only your own module keeps builds small and independent.
#
#   adamant_test(NAME name SOURCES a.cpp b.cpp [LIBS adamant_data] [LABELS l1 l2])
#       a GoogleTest executable run once by ctest.
#   adamant_mpi_test(NAME name SOURCES a.cpp NP 2 3 4 [LABELS ...] [TIMEOUT seconds])
#       a GoogleTest executable (main from tests/support/mpi_test_main.cpp) run
#       under mpirun once per process count, as ctest tests name_np2, name_np3, ...
#   adamant_gpu_test(NAME name SOURCES a.cu [NP 2] [TIMEOUT seconds])
#       only when ADAMANT_CUDA; labelled `gpu` so CPU-only CI skips it.
#
# A rank that fails on its own can leave the others waiting in a collective, so every test
# under mpirun ends after TIMEOUT seconds (default 600) instead of stalling CI.

set(ADAMANT_MPIEXEC_FLAGS --allow-run-as-root --oversubscribe --bind-to none
    --mca btl self,vader --mca pml ob1 CACHE STRING "mpirun flags used by tests")

function(adamant_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_LIBS)
    set(T_LIBS adamant)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} adamant_test_support GTest::gtest GTest::gtest_main)
  adamant_warnings(${T_NAME})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "cpu;${T_LABELS}"
    ENVIRONMENT "ADAMANT_DATA_DIR=${ADAMANT_DATA_DIR};OMP_NUM_THREADS=2")
endfunction()

function(adamant_mpi_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;NP;LABELS;LIBS" ${ARGN})
  if(NOT T_LIBS)
    set(T_LIBS adamant)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${T_NAME} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/support/mpi_test_main.cpp)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} adamant_test_support GTest::gtest)
  adamant_warnings(${T_NAME})
  foreach(np IN LISTS T_NP)
    add_test(NAME ${T_NAME}_np${np}
      COMMAND ${MPIEXEC_EXECUTABLE} ${ADAMANT_MPIEXEC_FLAGS} -np ${np} $<TARGET_FILE:${T_NAME}>)
    set_tests_properties(${T_NAME}_np${np} PROPERTIES LABELS "cpu;mpi;${T_LABELS}" PROCESSORS ${np} TIMEOUT ${T_TIMEOUT}
      ENVIRONMENT "ADAMANT_DATA_DIR=${ADAMANT_DATA_DIR};OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
  endforeach()
endfunction()

function(adamant_gpu_test)
  if(NOT ADAMANT_CUDA)
    return()
  endif()
  # ONE_GPU_PER_RANK: the ranks need a GPU each (NCCL); with fewer GPUs the test is skipped.
  cmake_parse_arguments(T "ONE_GPU_PER_RANK" "NAME;TIMEOUT" "SOURCES;NP;LIBS" ${ARGN})
  if(NOT T_LIBS)
    set(T_LIBS adamant)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  if(T_NP)
    add_executable(${T_NAME} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/support/mpi_test_main.cpp)
    target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} adamant_test_support GTest::gtest)
    set(gpus_needed 0)
    if(T_ONE_GPU_PER_RANK)
      set(gpus_needed ${T_NP})
    endif()
    # With fewer GPUs than gpus_needed every rank exits with 77: skipped, saying why (mpi_test_main.cpp).
    add_test(NAME ${T_NAME}
      COMMAND ${MPIEXEC_EXECUTABLE} ${ADAMANT_MPIEXEC_FLAGS} -x NCCL_NVLS_ENABLE=0 -x ADAMANT_TEST_GPUS=${gpus_needed}
              -np ${T_NP} $<TARGET_FILE:${T_NAME}>)
    set_tests_properties(${T_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT})
  else()
    add_executable(${T_NAME} ${T_SOURCES})
    target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} adamant_test_support GTest::gtest GTest::gtest_main)
    add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  endif()
  adamant_warnings(${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "gpu" ENVIRONMENT "NCCL_NVLS_ENABLE=0")
endfunction()

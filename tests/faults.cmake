# Failure handling and bad input (included from tests/CMakeLists.txt).
#  - [bad_input] tests run like the other MPI tests, one CTest test per
#    file at 1..4 ranks (mpi.bad_input.np1..4).
#  - the cheap [faults] cases of test_faults.cpp run like the other MPI
#    tests (mpi.faults.np1..4); the longer ones, [.faults] (injected I/O
#    errors, throwing planners), are hidden from those runs and run here at 2
#    and 4 ranks with a short TIMEOUT: a rank that hangs on another's failure
#    fails the test.
#  - cairn_fault_env: a program armed through CAIRN_FAULT, as an example
#    driven by CTest would be.
target_sources(cairn_mpi_tests PRIVATE mpi/test_faults.cpp mpi/test_bad_input.cpp)
list(APPEND _cairn_mpi_test_files bad_input faults)

foreach(np 2 4)
  cairn_add_mpi_test(NAME mpi_faults_np${np} TARGET cairn_mpi_tests NP ${np} ARGS "[faults][.]")
  set_tests_properties(mpi_faults_np${np} PROPERTIES TIMEOUT 240)
  set_property(TEST mpi_faults_np${np} APPEND PROPERTY ENVIRONMENT
    "CAIRN_TEST_DIR=${CMAKE_CURRENT_BINARY_DIR}/tmp/mpi_faults_np${np}")
endforeach()

add_executable(cairn_fault_env mpi/fault_env.cpp)
target_link_libraries(cairn_fault_env PRIVATE Cairn::cairn)
cairn_add_mpi_test(NAME mpi_fault_env TARGET cairn_fault_env NP 2 ARGS ${CMAKE_CURRENT_BINARY_DIR}/tmp/fault_env)
set_tests_properties(mpi_fault_env PROPERTIES TIMEOUT 60)
set_property(TEST mpi_fault_env APPEND PROPERTY ENVIRONMENT "CAIRN_FAULT=rank=1,point=mpiio.write,errno=ENOSPC")

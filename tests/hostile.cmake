# Hostile files in checkpoints (included from tests/CMakeLists.txt):
# symbolic links and FIFOs in place of Cairn's files, container datasets
# whose bytes live elsewhere. Hidden from the mpi.<file>.np* runs
# ([.hostile]) and run here with a short TIMEOUT: a FIFO that blocks an open
# fails the test.
target_sources(cairn_mpi_tests PRIVATE mpi/test_hostile_files.cpp)
foreach(np 1 2 3)
  cairn_add_mpi_test(NAME mpi_hostile_np${np} TARGET cairn_mpi_tests NP ${np} ARGS "[hostile]")
  set_tests_properties(mpi_hostile_np${np} PROPERTIES TIMEOUT 90)
  set_property(TEST mpi_hostile_np${np} APPEND PROPERTY ENVIRONMENT
    "CAIRN_TEST_DIR=${CMAKE_CURRENT_BINARY_DIR}/tmp/mpi_hostile_np${np}")
endforeach()

# cairn_add_mpi_test(NAME <name> TARGET <target> NP <n> [ARGS ...]):
# registers `mpiexec -n <n> <target> ARGS` with PROCESSORS <n>, so `ctest -j`
# never runs more ranks than cores at once.
set(CAIRN_MPIEXEC_PREFLAGS "" CACHE STRING "Extra flags for mpiexec in tests")
if(NOT DEFINED CAIRN_MPIEXEC_IS_OPENMPI)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _cairn_mpiexec_version ERROR_QUIET)
  if(_cairn_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(CAIRN_MPIEXEC_IS_OPENMPI TRUE CACHE INTERNAL "")
  else()
    set(CAIRN_MPIEXEC_IS_OPENMPI FALSE CACHE INTERNAL "")
  endif()
endif()
set(_cairn_mpiexec_flags ${MPIEXEC_PREFLAGS} ${CAIRN_MPIEXEC_PREFLAGS})
if(CAIRN_MPIEXEC_IS_OPENMPI)
  # Tests run more ranks than the CI machine has cores.
  list(APPEND _cairn_mpiexec_flags --oversubscribe)
endif()
set(CAIRN_MPIEXEC_FLAGS ${_cairn_mpiexec_flags} CACHE INTERNAL "")

function(cairn_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;TARGET;NP" "ARGS;COMMAND" ${ARGN})
  if(T_TARGET)
    set(exe $<TARGET_FILE:${T_TARGET}>)
  else()
    set(exe ${T_COMMAND})
  endif()
  add_test(NAME ${T_NAME}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} ${CAIRN_MPIEXEC_FLAGS} ${exe} ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES PROCESSORS ${T_NP} TIMEOUT 300
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()

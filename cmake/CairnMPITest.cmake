# cairn_add_mpi_test(NAME <name> TARGET <target> NP <n> [ARGS ...]):
# registers `mpiexec -n <n> <target> ARGS` with PROCESSORS <n>, so `ctest -j`
# never runs more ranks than cores at once.
set(CAIRN_MPIEXEC_PREFLAGS "" CACHE STRING "Extra flags for mpiexec in tests")
# Which MPI mpiexec and the library are (Open MPI, MPICH and its derivatives,
# or unknown: srun, a site's launcher): an mpiexec of another MPI than the
# one Cairn links (on Debian with both, FindMPI can take /usr/bin/mpiexec,
# Open MPI's, for MPICH) would start every rank as a singleton, and every
# multi-rank test would fail for no reason of Cairn's.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _cairn_mpiexec_version
  ERROR_VARIABLE _cairn_mpiexec_version TIMEOUT 60)
set(_cairn_mpiexec_kind "")
if(_cairn_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(_cairn_mpiexec_kind "Open MPI")
elseif(_cairn_mpiexec_version MATCHES "HYDRA|Hydra|MPICH")
  set(_cairn_mpiexec_kind "MPICH")
endif()
include(CairnMPICheck)
cairn_mpi_kind(CAIRN_MPI_KIND)   # also for the install test's other MPI
if(_cairn_mpiexec_kind AND CAIRN_MPI_KIND AND NOT _cairn_mpiexec_kind STREQUAL CAIRN_MPI_KIND)
  message(FATAL_ERROR "The tests' mpiexec (${MPIEXEC_EXECUTABLE}) is ${_cairn_mpiexec_kind}'s, the MPI "
    "Cairn links (${MPI_C_COMPILER}) is ${CAIRN_MPI_KIND}: set MPIEXEC_EXECUTABLE to the same MPI's "
    "mpiexec (Debian: mpiexec.mpich, mpiexec.openmpi), or BUILD_TESTING=OFF.")
endif()
set(CAIRN_MPIEXEC_IS_OPENMPI FALSE)
if(_cairn_mpiexec_kind STREQUAL "Open MPI")
  set(CAIRN_MPIEXEC_IS_OPENMPI TRUE)
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

# cairn_singleton_tests(<test>...): for tests that start MPI as a singleton
# (MPI_Init in a process not started by mpiexec) and never run mpiexec. Under
# Open MPI such a start forks a supporting daemon (orted) unless
# ess_singleton_isolated is set (a singleton that never spawns needs none),
# which makes the start about a third faster. Nothing under MPICH. Call it in
# the directory that adds the tests.
set(CAIRN_SINGLETON_TEST_ENV "")
if(CAIRN_MPI_KIND STREQUAL "Open MPI")
  set(CAIRN_SINGLETON_TEST_ENV "OMPI_MCA_ess_singleton_isolated=1")
endif()
function(cairn_singleton_tests)
  if(CAIRN_SINGLETON_TEST_ENV)
    set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT "${CAIRN_SINGLETON_TEST_ENV}")
  endif()
endfunction()

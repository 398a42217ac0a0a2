# Part of Cairn's CMake package, included by CairnConfig.cmake when Cairn was
# built with the Fortran module: the imported target Cairn::cairn_fortran
# (module `cairn`, library libcairn_fortran). Defined for consumers that
# enabled Fortran and whose MPI has Fortran support;
# find_package(Cairn COMPONENTS fortran) requires it.
# Installed beside CairnConfig.cmake: the policies this file uses are its
# own, whatever the consuming project's cmake_minimum_required.
cmake_policy(PUSH)
cmake_policy(VERSION 3.14...3.25)
set(Cairn_fortran_FOUND FALSE)
if(CMAKE_Fortran_COMPILER_LOADED)
  # As for C in CairnConfig.cmake: FindMPI is pointed at the Fortran wrapper
  # of Cairn's MPI unless the project chose one, and another MPI is refused.
  if(NOT TARGET MPI::MPI_Fortran)
    cairn_mpi_hint(Fortran "${Cairn_MPI_Fortran_COMPILER}")
    find_package(MPI 3.0 QUIET COMPONENTS Fortran)
  endif()
  set(_cairn_mpi_missing "")
  if(TARGET MPI::MPI_Fortran)
    cairn_mpi_mismatch(_cairn_mpi_missing Cairn_MPI_C_LIBRARIES MPI_Fortran_LIBRARIES)
  endif()
  if(_cairn_mpi_missing)
    message(WARNING "Cairn's Fortran module is left out: this project's MPI for Fortran (${MPI_Fortran_COMPILER}) is another MPI than Cairn's (${Cairn_MPI_Fortran_COMPILER}, library ${_cairn_mpi_missing}); set MPI_Fortran_COMPILER=${Cairn_MPI_Fortran_COMPILER}")
  elseif(TARGET MPI::MPI_Fortran)
    include("${CMAKE_CURRENT_LIST_DIR}/CairnFortranTargets.cmake")
    set(Cairn_fortran_FOUND TRUE)
  endif()
  unset(_cairn_mpi_missing)
endif()
cmake_policy(POP)

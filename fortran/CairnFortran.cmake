# Part of Cairn's CMake package, included by CairnConfig.cmake when Cairn was
# built with the Fortran module: the imported target Cairn::cairn_fortran
# (module `cairn`, library libcairn_fortran). Defined for consumers that
# enabled Fortran and whose MPI has Fortran support;
# find_package(Cairn COMPONENTS fortran) requires it.
set(Cairn_fortran_FOUND FALSE)
if(CMAKE_Fortran_COMPILER_LOADED)
  if(NOT TARGET MPI::MPI_Fortran)
    find_package(MPI 3.0 QUIET COMPONENTS Fortran)
  endif()
  if(TARGET MPI::MPI_Fortran)
    include("${CMAKE_CURRENT_LIST_DIR}/CairnFortranTargets.cmake")
    set(Cairn_fortran_FOUND TRUE)
  endif()
endif()

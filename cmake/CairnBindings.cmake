# The C API and the Fortran module. Included from the top-level CMakeLists.txt
# (so that enable_language(Fortran) happens at the top level, as CMake
# requires for the Fortran tests and examples in other directories).
#
#   CAIRN_USE_FORTRAN  ON/OFF/AUTO (default AUTO): build the Fortran module
#                      `cairn` (library Cairn::cairn_fortran). AUTO builds it
#                      when a Fortran compiler and MPI for Fortran are found.
# Sets CAIRN_HAVE_FORTRAN (0/1) and CAIRN_HAVE_MPI_F08 (0/1) for the tests
# and examples.

add_subdirectory(${PROJECT_SOURCE_DIR}/src/capi ${PROJECT_BINARY_DIR}/src/capi)

cairn_option(CAIRN_USE_FORTRAN "Build the Fortran module" AUTO)
string(TOUPPER "${CAIRN_USE_FORTRAN}" _cairn_use_fortran)
set(CAIRN_HAVE_FORTRAN 0)
set(CAIRN_HAVE_MPI_F08 0)
if(NOT _cairn_use_fortran STREQUAL "OFF")
  include(CheckLanguage)
  check_language(Fortran)
  if(CMAKE_Fortran_COMPILER)
    enable_language(Fortran)
    find_package(MPI 3.0 COMPONENTS Fortran)
    if(MPI_Fortran_FOUND)
      set(CAIRN_HAVE_FORTRAN 1)
      if(MPI_Fortran_HAVE_F08_MODULE)
        set(CAIRN_HAVE_MPI_F08 1)
      endif()
    else()
      set(_cairn_fortran_why "MPI for Fortran was not found")
    endif()
  else()
    set(_cairn_fortran_why "no Fortran compiler was found")
  endif()
  if(NOT CAIRN_HAVE_FORTRAN AND _cairn_use_fortran STREQUAL "ON")
    message(FATAL_ERROR "CAIRN_USE_FORTRAN is ON but ${_cairn_fortran_why}")
  endif()
endif()
if(CAIRN_HAVE_FORTRAN)
  add_subdirectory(${PROJECT_SOURCE_DIR}/fortran ${PROJECT_BINARY_DIR}/fortran)
endif()
message(STATUS "Cairn bindings: C API yes, Fortran module ${CAIRN_HAVE_FORTRAN} (CAIRN_USE_FORTRAN=${CAIRN_USE_FORTRAN}, mpi_f08 ${CAIRN_HAVE_MPI_F08})")

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
    include(CairnMPICheck)
    cairn_mpi_mismatch(_cairn_mpi_missing MPI_C_LIBRARIES MPI_Fortran_LIBRARIES)
    if(MPI_Fortran_FOUND AND _cairn_mpi_missing)
      # E.g. MPI_C_COMPILER=mpicc.mpich given, and FindMPI's search found
      # Open MPI's mpif90: the module would link two MPIs.
      set(_cairn_fortran_why "MPI for Fortran (${MPI_Fortran_COMPILER}) is another MPI than Cairn's (${MPI_C_COMPILER}): ${_cairn_mpi_missing} is not among its libraries; set MPI_Fortran_COMPILER to the Fortran wrapper of Cairn's MPI")
    elseif(MPI_Fortran_FOUND)
      set(CAIRN_HAVE_FORTRAN 1)
      # Some MPI wrappers (Debian's MPICH) carry gfortran-only options such as
      # -fallow-argument-mismatch, which FindMPI passes to every language of
      # a target: keep them to Fortran sources (the tests and examples mix in C).
      get_target_property(_cairn_opts MPI::MPI_Fortran INTERFACE_COMPILE_OPTIONS)
      if(_cairn_opts)
        list(TRANSFORM _cairn_opts REPLACE "^(.+)$" "$<$<COMPILE_LANGUAGE:Fortran>:\\1>")
        set_property(TARGET MPI::MPI_Fortran PROPERTY INTERFACE_COMPILE_OPTIONS "${_cairn_opts}")
      endif()
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
if(NOT CAIRN_HAVE_FORTRAN AND _cairn_fortran_why)
  message(STATUS "Cairn bindings: no Fortran module: ${_cairn_fortran_why}")
endif()

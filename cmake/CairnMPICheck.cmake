# cairn_mpi_mismatch(<out> <want-var> <have-var>)
#
# Two MPI implementations in one program (one for libcairn, another for the
# code that calls it, as on a Debian machine with both Open MPI and MPICH)
# fail at link time or, worse, at run time. <want-var> names a list of the MPI
# libraries Cairn was built with (MPI_C_LIBRARIES), <have-var> the list found
# now (MPI_<lang>_LIBRARIES of the same or another language: the C library is
# among the C++ and Fortran ones). Sets <out> to the first wanted library
# (an absolute path) that is not among those found, symlinks resolved; to ""
# when every one is, or when either list names no file (compiler wrappers
# that link MPI themselves, e.g. Cray's, leave the lists empty).
# Used by Cairn's build (its Fortran module) and by CairnConfig.cmake.
include_guard(GLOBAL)
# Installed beside CairnConfig.cmake: the policies this file uses are its
# own, whatever the consuming project's cmake_minimum_required.
cmake_policy(PUSH)
cmake_policy(VERSION 3.14...3.25)

# cairn_mpi_hint(<lang> <wrapper>): points FindMPI at <wrapper> (the MPI
# compiler wrapper Cairn was built with) for <lang>, as the cache default of
# MPI_<lang>_COMPILER, unless the project chose an MPI itself
# (MPI_<lang>_COMPILER, MPI_HOME) or has found MPI for <lang> already.
# A macro: the cache entry is the caller's to see.
macro(cairn_mpi_hint lang wrapper)
  if(NOT TARGET MPI::MPI_${lang} AND NOT DEFINED CACHE{MPI_${lang}_COMPILER}
     AND NOT DEFINED MPI_${lang}_COMPILER AND NOT MPI_HOME AND NOT DEFINED ENV{MPI_HOME}
     AND EXISTS "${wrapper}")
    set(MPI_${lang}_COMPILER "${wrapper}" CACHE FILEPATH
      "MPI ${lang} compiler wrapper (default: the one Cairn was built with)")
  endif()
endmacro()

function(cairn_mpi_mismatch out want_var have_var)
  set(have "")
  foreach(lib IN LISTS ${have_var})
    if(IS_ABSOLUTE "${lib}")
      get_filename_component(real "${lib}" REALPATH)
      list(APPEND have "${real}")
    endif()
  endforeach()
  set(missing "")
  if(have)
    foreach(lib IN LISTS ${want_var})
      if(IS_ABSOLUTE "${lib}")
        get_filename_component(real "${lib}" REALPATH)
        if(NOT real IN_LIST have)
          set(missing "${lib}")
          break()
        endif()
      endif()
    endforeach()
  endif()
  set(${out} "${missing}" PARENT_SCOPE)
endfunction()

# cairn_mpi_kind(<out>): "Open MPI" or "MPICH" (and its derivatives) for the
# MPI found for C, from the defines of its mpi.h; "" when neither.
function(cairn_mpi_kind out)
  set(kind "")
  foreach(dir IN LISTS MPI_C_HEADER_DIR MPI_C_INCLUDE_DIRS)
    if(NOT kind AND EXISTS "${dir}/mpi.h")
      file(STRINGS "${dir}/mpi.h" defines REGEX "define +(OPEN_MPI|MPICH_VERSION) ")
      if(defines MATCHES "OPEN_MPI")
        set(kind "Open MPI")
      elseif(defines MATCHES "MPICH_VERSION")
        set(kind "MPICH")
      endif()
    endif()
  endforeach()
  set(${out} "${kind}" PARENT_SCOPE)
endfunction()

# cairn_check_hdf5_mpi(<hdf5-libs-var> <mpi-libs-var>)
#
# Stops the configuration when the parallel HDF5 found was built with another
# MPI than the one found for Cairn (e.g. MPI_C_COMPILER=mpicc.mpich given, and
# FindHDF5 took Open MPI's h5pcc): libcairn would load both MPIs and crash at
# run time. Compares the shared libraries HDF5's library needs (readelf's
# NEEDED) with the sonames of the MPI libraries: an MPI library among them
# that is not Cairn's is an error. Says nothing where it cannot tell (no
# readelf, static libraries, MPI linked implicitly by compiler wrappers).
function(cairn_check_hdf5_mpi hdf5_var mpi_var)
  if(NOT CMAKE_READELF)
    return()
  endif()
  set(mpi_sonames "")
  foreach(lib IN LISTS ${mpi_var})
    if(IS_ABSOLUTE "${lib}" AND EXISTS "${lib}")
      execute_process(COMMAND "${CMAKE_READELF}" -d "${lib}" OUTPUT_VARIABLE out ERROR_QUIET)
      string(REGEX MATCH "soname: \\[([^]]+)\\]" m "${out}")
      if(CMAKE_MATCH_1)
        list(APPEND mpi_sonames "${CMAKE_MATCH_1}")
      endif()
    endif()
  endforeach()
  if(NOT mpi_sonames)
    return()
  endif()
  foreach(lib IN LISTS ${hdf5_var})
    get_filename_component(name "${lib}" NAME)
    if(NOT IS_ABSOLUTE "${lib}" OR NOT EXISTS "${lib}" OR NOT name MATCHES "hdf5")
      continue()
    endif()
    execute_process(COMMAND "${CMAKE_READELF}" -d "${lib}" OUTPUT_VARIABLE out ERROR_QUIET)
    string(REGEX MATCHALL "NEEDED\\)[^[]*\\[([^]]+)\\]" needed_lines "${out}")
    set(ours FALSE)
    set(other "")
    foreach(line IN LISTS needed_lines)
      string(REGEX REPLACE ".*\\[([^]]+)\\]" "\\1" needed "${line}")
      if(needed IN_LIST mpi_sonames)
        set(ours TRUE)
      elseif(needed MATCHES "^lib(mpi|mpich|mpi_[a-z0-9_]+|msmpi)\\.so")
        set(other "${needed}")
      endif()
    endforeach()
    if(other AND NOT ours)
      message(FATAL_ERROR "The parallel HDF5 found (${lib}) was built with another MPI than Cairn's: "
        "it needs ${other}, Cairn's MPI (${MPI_C_COMPILER}) is ${mpi_sonames}. Point FindHDF5 at the "
        "HDF5 of Cairn's MPI (HDF5_C_COMPILER_EXECUTABLE=<its h5pcc>, or HDF5_ROOT), or MPI_C_COMPILER "
        "at HDF5's MPI, in a fresh build directory (FindHDF5 keeps what it found in the cache).")
    endif()
  endforeach()
endfunction()
cmake_policy(POP)

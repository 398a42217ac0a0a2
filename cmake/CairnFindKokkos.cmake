# cairn_find_kokkos(<found_var>): finds Kokkos and makes sure the target
# Kokkos::kokkos can be linked. Sets <found_var> to TRUE or FALSE in the
# caller's scope, CAIRN_KOKKOS_VERSION to the version found, and
# CAIRN_KOKKOS_DEVICES / CAIRN_KOKKOS_CXX_COMPILER_ID to Kokkos' backends and
# compiler where its config names them (empty otherwise).
#
# Used by Cairn's own build (cmake/CairnKokkos.cmake) and installed beside
# CairnConfig.cmake, so that projects using Cairn::kokkos get the same fixes:
#
# 1. find_package(Kokkos CONFIG). A standalone Kokkos (3.x, 4.x) install is
#    used as it is.
# 2. Debian's libtrilinos-kokkos-dev (Kokkos 3.4 from Trilinos 13.2) ships a
#    KokkosConfig.cmake whose Kokkos::kokkos names the include directory
#    /usr/lib/include, which does not exist (the headers are in
#    /usr/include/trilinos), and CMake refuses to generate a project linking
#    it. Include directories of Kokkos::kokkos that do not exist are replaced
#    by the directory that holds Kokkos_Core.hpp (Kokkos_INCLUDE_DIRS of the
#    same config, or found by find_path).
# 3. No usable config at all: an imported INTERFACE target Kokkos::kokkos is
#    made from Kokkos_Core.hpp (found in <prefix>/include or
#    <prefix>/include/trilinos) and the kokkoscore library
#    (libkokkoscore or libtrilinos_kokkoscore).
#
# Nothing outside the calling project is modified.
include_guard(GLOBAL)
# Installed beside CairnConfig.cmake: the policies this file uses are its
# own, whatever the consuming project's cmake_minimum_required.
cmake_policy(PUSH)
cmake_policy(VERSION 3.14...3.25)

function(cairn_find_kokkos found_var)
  set(${found_var} FALSE PARENT_SCOPE)
  if(NOT TARGET Kokkos::kokkos)
    find_package(Kokkos CONFIG QUIET)
  endif()

  if(TARGET Kokkos::kokkos)
    set(version "${Kokkos_VERSION}")
    get_target_property(incs Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT incs)
      set(incs "")
    endif()
    set(good "")
    set(missing "")
    foreach(dir IN LISTS incs)
      if(dir MATCHES "\\$<" OR IS_DIRECTORY "${dir}")
        list(APPEND good "${dir}")
      else()
        list(APPEND missing "${dir}")
      endif()
    endforeach()
    if(missing)
      # Look for the headers where the config's own variables say they are.
      set(hints "")
      foreach(dir IN LISTS Kokkos_INCLUDE_DIRS KokkosCore_INCLUDE_DIRS)
        get_filename_component(dir "${dir}" ABSOLUTE)
        list(APPEND hints "${dir}")
      endforeach()
      if(Kokkos_INSTALL_DIR)
        list(APPEND hints "${Kokkos_INSTALL_DIR}/include")
      endif()
      find_path(CAIRN_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp HINTS ${hints} PATH_SUFFIXES trilinos kokkos
        DOC "Directory of Kokkos_Core.hpp (Cairn's fix-up of a broken Kokkos::kokkos)")
      if(NOT CAIRN_KOKKOS_INCLUDE_DIR)
        message(STATUS "Kokkos::kokkos names missing include directories (${missing}) and Kokkos_Core.hpp was not found: not using Kokkos")
        return()
      endif()
      list(APPEND good "${CAIRN_KOKKOS_INCLUDE_DIR}")
      list(REMOVE_DUPLICATES good)
      set_property(TARGET Kokkos::kokkos PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${good}")
      message(STATUS "Kokkos::kokkos names missing include directories (${missing}); using ${CAIRN_KOKKOS_INCLUDE_DIR}")
    endif()
  else()
    find_path(CAIRN_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp PATH_SUFFIXES trilinos kokkos
      DOC "Directory of Kokkos_Core.hpp (when Kokkos has no usable CMake config)")
    find_library(CAIRN_KOKKOS_CORE_LIBRARY NAMES kokkoscore trilinos_kokkoscore
      DOC "The kokkoscore library (when Kokkos has no usable CMake config)")
    if(NOT CAIRN_KOKKOS_INCLUDE_DIR OR NOT CAIRN_KOKKOS_CORE_LIBRARY)
      return()
    endif()
    set(version "")
    if(EXISTS "${CAIRN_KOKKOS_INCLUDE_DIR}/KokkosCore_config.h")
      file(STRINGS "${CAIRN_KOKKOS_INCLUDE_DIR}/KokkosCore_config.h" line REGEX "^#define KOKKOS_VERSION [0-9]+")
      if(line MATCHES "KOKKOS_VERSION ([0-9]+)")
        math(EXPR major "${CMAKE_MATCH_1} / 10000")
        math(EXPR minor "${CMAKE_MATCH_1} / 100 % 100")
        math(EXPR patch "${CMAKE_MATCH_1} % 100")
        set(version "${major}.${minor}.${patch}")
      endif()
    endif()
    add_library(Kokkos::kokkos INTERFACE IMPORTED)
    set_target_properties(Kokkos::kokkos PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${CAIRN_KOKKOS_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "${CAIRN_KOKKOS_CORE_LIBRARY};${CMAKE_DL_LIBS}"
      INTERFACE_COMPILE_FEATURES cxx_std_14)
    message(STATUS "Kokkos: no usable CMake config; using ${CAIRN_KOKKOS_INCLUDE_DIR} and ${CAIRN_KOKKOS_CORE_LIBRARY}")
  endif()

  set(CAIRN_KOKKOS_VERSION "${version}" PARENT_SCOPE)
  # The backends and the compiler Kokkos was built with, where its config
  # says (e.g. "SERIAL;CUDA" and NVIDIA): a CUDA build compiles device code
  # with nvcc, whose defaults differ from the host compiler's (see
  # examples/heat2d_kokkos).
  set(CAIRN_KOKKOS_DEVICES "${Kokkos_DEVICES}" PARENT_SCOPE)
  set(CAIRN_KOKKOS_CXX_COMPILER_ID "${Kokkos_CXX_COMPILER_ID}" PARENT_SCOPE)
  set(${found_var} TRUE PARENT_SCOPE)
endfunction()
cmake_policy(POP)

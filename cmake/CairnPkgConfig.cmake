# Generates and installs cairn.pc (from cmake/cairn.pc.in) into
# <libdir>/pkgconfig, for builds that do not use CMake:
#
#   c++ -std=c++17 app.cpp $(pkg-config --cflags --libs cairn)
#
# and, where the Fortran module is built, cairn-fortran.pc (from
# cmake/cairn-fortran.pc.in: Requires: cairn, the module directory in Cflags,
# -lcairn_fortran and the same rpath variable in Libs):
#
#   mpif90 $(pkg-config --cflags cairn-fortran) app.f90 $(pkg-config --libs cairn-fortran)
#
# Cflags and Libs carry what Cairn::cairn carries: Cairn's headers and
# library, MPI and the definitions that keep the MPI C++ bindings out; so a
# plain C++ compiler works as well as mpicxx. MPI comes through its own
# pkg-config module (Requires: ompi-c for Open MPI, mpich for MPICH) where
# pkg-config knows one for the MPI Cairn was built with (the cache variable
# CAIRN_PKG_CONFIG_MPI names it, or NONE), otherwise as its -I, -L and -l
# flags. Libs has -Wl,-rpath,${libdir} (the variable `rpath`), so that a
# program finds libcairn wherever the prefix is, without LD_LIBRARY_PATH;
# `pkg-config --define-variable=rpath= --libs cairn` leaves it out. The other
# libraries libcairn links (HDF5, ...) are private to a shared libcairn
# (Libs.private, for `pkg-config --static`) and public for a static one;
# every library is written as -L<dir> -l<name> (no -L for the compiler's own
# directories), never as a file of the build machine.
# The file is relocatable: its prefix is ${pcfiledir}/<relative path>, so it
# stays right after `cmake --install --prefix <elsewhere>`.
include_guard(GLOBAL)

function(_cairn_pc_libs out)
  set(implicit ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES} ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
  set(result "")
  set(dirs "")
  foreach(lib IN LISTS ARGN)
    if(lib MATCHES "^-")
      string(APPEND result " ${lib}")
    elseif(IS_ABSOLUTE "${lib}")
      get_filename_component(dir "${lib}" DIRECTORY)
      get_filename_component(name "${lib}" NAME)
      if(name MATCHES "^lib(.+)\\.(so|a|dylib)(\\.[0-9.]+)?$")
        # -L<dir> -l<name>: the compiler's own directories (libdl, libm, ...)
        # need no -L, and libdl.a of glibc >= 2.34 (empty) is just -ldl.
        set(name "${CMAKE_MATCH_1}")
        if(NOT dir IN_LIST implicit AND NOT dir IN_LIST dirs)
          list(APPEND dirs "${dir}")
          string(APPEND result " -L${dir}")
        endif()
        string(APPEND result " -l${name}")
      else()
        string(APPEND result " ${lib}")
      endif()
    elseif(NOT lib STREQUAL "")
      string(APPEND result " -l${lib}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# _cairn_pc_mpi_module(<out>): the pkg-config module of the MPI Cairn was
# built with (CAIRN_PKG_CONFIG_MPI, or found: ompi-c, mpich), checked to be
# that MPI (its include directories and library directories hold Cairn's
# MPI's); "" when there is none.
function(_cairn_pc_mpi_module out)
  set(${out} "" PARENT_SCOPE)
  set(CAIRN_PKG_CONFIG_MPI "" CACHE STRING
    "pkg-config module of Cairn's MPI, for cairn.pc's Requires (empty: found; NONE: MPI's flags instead)")
  if(CAIRN_PKG_CONFIG_MPI STREQUAL "NONE")
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(NOT PKG_CONFIG_EXECUTABLE)
    return()
  endif()
  if(CAIRN_PKG_CONFIG_MPI)
    set(candidates "${CAIRN_PKG_CONFIG_MPI}")
  else()
    cairn_mpi_kind(kind)   # cmake/CairnMPICheck.cmake
    if(kind STREQUAL "Open MPI")
      set(candidates ompi-c ompi)
    elseif(kind STREQUAL "MPICH")
      set(candidates mpich)
    else()
      return()
    endif()
  endif()
  set(want_incs "")
  foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
    get_filename_component(dir "${dir}" REALPATH)
    list(APPEND want_incs "${dir}")
  endforeach()
  set(want_libdirs "")
  foreach(lib IN LISTS MPI_C_LIBRARIES)
    if(IS_ABSOLUTE "${lib}")
      get_filename_component(dir "${lib}" DIRECTORY)
      get_filename_component(dir "${dir}" REALPATH)
      list(APPEND want_libdirs "${dir}")
    endif()
  endforeach()
  foreach(module IN LISTS candidates)
    execute_process(COMMAND "${CMAKE_COMMAND}" -E env PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
        "${PKG_CONFIG_EXECUTABLE}" --cflags-only-I --libs-only-L "${module}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      continue()
    endif()
    separate_arguments(flags UNIX_COMMAND "${flags}")
    set(have "")
    foreach(flag IN LISTS flags)
      if(flag MATCHES "^-[IL](.+)$")
        get_filename_component(dir "${CMAKE_MATCH_1}" REALPATH)
        list(APPEND have "${dir}")
      endif()
    endforeach()
    set(ok TRUE)
    foreach(dir IN LISTS want_incs want_libdirs)
      if(NOT dir IN_LIST have)
        set(ok FALSE)
      endif()
    endforeach()
    if(ok AND want_incs)
      set(${out} "${module}" PARENT_SCOPE)
      return()
    elseif(CAIRN_PKG_CONFIG_MPI)
      message(WARNING "cairn.pc: CAIRN_PKG_CONFIG_MPI=${module} is not the MPI Cairn was built with (${MPI_C_COMPILER}); using MPI's flags")
    endif()
  endforeach()
endfunction()

function(_cairn_pc_dir out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

function(cairn_install_pkg_config)
  set(pcdir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  if(IS_ABSOLUTE "${pcdir}")
    # An absolute libdir cannot move with the prefix.
    set(CAIRN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  else()
    # ${pcfiledir} is the directory of the .pc file (pkg-config, pkgconf).
    file(RELATIVE_PATH rel "/cairn_prefix/${pcdir}" "/cairn_prefix")
    string(REGEX REPLACE "/$" "" rel "${rel}")
    set(CAIRN_PC_PREFIX "\${pcfiledir}/${rel}")
  endif()
  _cairn_pc_dir(CAIRN_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  _cairn_pc_dir(CAIRN_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")

  _cairn_pc_mpi_module(mpi_module)
  set(cflags "")
  set(CAIRN_PC_REQUIRES "")
  if(mpi_module)
    set(CAIRN_PC_REQUIRES "\nRequires: ${mpi_module}")
    set(mpi_libs "")
  else()
    foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
      string(APPEND cflags " -I${dir}")
    endforeach()
    _cairn_pc_libs(mpi_libs ${CAIRN_MPI_C_LINK_OPTIONS} ${MPI_C_LIBRARIES})
  endif()
  foreach(opt IN LISTS MPI_C_COMPILE_OPTIONS)
    string(APPEND cflags " ${opt}")
  endforeach()
  foreach(def IN LISTS MPI_C_COMPILE_DEFINITIONS ITEMS OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
    string(APPEND cflags " -D${def}")
  endforeach()
  set(CAIRN_PC_CFLAGS "${cflags}")

  # Every other library libcairn links (HDF5, and whatever is added later):
  # files and -l flags as they are, imported targets by their location.
  get_target_property(linked cairn LINK_LIBRARIES)
  set(other "")
  foreach(item IN LISTS linked)
    if(item STREQUAL "MPI::MPI_C" OR item MATCHES "^(\\$<|::@)")
      continue()
    elseif(TARGET "${item}")
      get_target_property(type "${item}" TYPE)
      get_target_property(imported "${item}" IMPORTED)
      if(imported AND NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(loc "${item}" IMPORTED_LOCATION)
        if(NOT loc)
          get_target_property(loc "${item}" IMPORTED_LOCATION_RELEASE)
        endif()
        if(loc)
          list(APPEND other "${loc}")
          continue()
        endif()
      endif()
      message(STATUS "cairn.pc: cannot express the link dependency ${item} for pkg-config; left out")
    else()
      list(APPEND other "${item}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES other)
  _cairn_pc_libs(other_libs ${other})
  if(BUILD_SHARED_LIBS)
    set(CAIRN_PC_LIBS "${mpi_libs}")
    set(CAIRN_PC_LIBS_PRIVATE "${other_libs}")
  else()
    # A static libcairn is C++: a C or Fortran program linking it needs the
    # C++ runtime, which only the C++ compiler links by itself (with GCC:
    # -lstdc++ -lm).
    set(cxx_runtime "")
    foreach(lib IN LISTS CMAKE_CXX_IMPLICIT_LINK_LIBRARIES)
      if(NOT lib IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES)
        list(APPEND cxx_runtime "${lib}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES cxx_runtime)
    _cairn_pc_libs(cxx_libs ${cxx_runtime})
    set(CAIRN_PC_LIBS "${mpi_libs}${other_libs}${cxx_libs}")
    set(CAIRN_PC_LIBS_PRIVATE "")
  endif()

  # A sanitized Cairn (CAIRN_SANITIZE) needs the sanitizer runtime in every
  # program that links it, first in the library list: the driver flag does that.
  if(CAIRN_SANITIZE_LINK_FLAG)
    set(CAIRN_PC_LIBS " ${CAIRN_SANITIZE_LINK_FLAG}${CAIRN_PC_LIBS}")
  endif()

  configure_file("${PROJECT_SOURCE_DIR}/cmake/cairn.pc.in" "${PROJECT_BINARY_DIR}/cairn.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/cairn.pc" DESTINATION "${pcdir}")

  # cairn-fortran.pc, where the Fortran module is built: its module directory
  # (Cflags, for FFLAGS) and libcairn_fortran, the rest through cairn.pc.
  if(TARGET cairn_fortran)
    configure_file("${PROJECT_SOURCE_DIR}/cmake/cairn-fortran.pc.in" "${PROJECT_BINARY_DIR}/cairn-fortran.pc" @ONLY)
    install(FILES "${PROJECT_BINARY_DIR}/cairn-fortran.pc" DESTINATION "${pcdir}")
  endif()
endfunction()

# Deferred to the end of the top-level CMakeLists.txt, when every library
# of libcairn is known.
cmake_language(DEFER DIRECTORY "${PROJECT_SOURCE_DIR}" CALL cairn_install_pkg_config)

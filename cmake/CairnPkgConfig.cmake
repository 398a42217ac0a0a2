# Generates and installs cairn.pc (from cmake/cairn.pc.in) into
# <libdir>/pkgconfig, for builds that do not use CMake:
#
#   c++ -std=c++17 app.cpp $(pkg-config --cflags --libs cairn)
#
# Cflags and Libs carry what Cairn::cairn carries: Cairn's headers and
# library, MPI's include directories and libraries (Cairn's headers include
# <mpi.h>) and the definitions that keep the MPI C++ bindings out; so a plain
# C++ compiler works as well as mpicxx. The other libraries libcairn links
# (HDF5, ...) are private to a shared libcairn (Libs.private, for
# `pkg-config --static`) and public for a static one.
# The file is relocatable: its prefix is ${pcfiledir}/<relative path>, so it
# stays right after `cmake --install --prefix <elsewhere>`.
include_guard(GLOBAL)

function(_cairn_pc_libs out)
  set(result "")
  foreach(lib IN LISTS ARGN)
    if(lib MATCHES "^-")
      string(APPEND result " ${lib}")
    elseif(IS_ABSOLUTE "${lib}")
      string(APPEND result " ${lib}")
    elseif(NOT lib STREQUAL "")
      string(APPEND result " -l${lib}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
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

  set(cflags "")
  foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
    string(APPEND cflags " -I${dir}")
  endforeach()
  foreach(opt IN LISTS MPI_C_COMPILE_OPTIONS)
    string(APPEND cflags " ${opt}")
  endforeach()
  foreach(def IN LISTS MPI_C_COMPILE_DEFINITIONS ITEMS OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
    string(APPEND cflags " -D${def}")
  endforeach()
  set(CAIRN_PC_CFLAGS "${cflags}")

  _cairn_pc_libs(mpi_libs ${CAIRN_MPI_C_LINK_OPTIONS} ${MPI_C_LIBRARIES})
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
endfunction()

# Deferred to the end of the top-level CMakeLists.txt, when every library
# of libcairn is known.
cmake_language(DEFER DIRECTORY "${PROJECT_SOURCE_DIR}" CALL cairn_install_pkg_config)

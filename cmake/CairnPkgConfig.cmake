# Generates and installs cairn.pc (from cmake/cairn.pc.in) into
# <libdir>/pkgconfig, for builds that do not use CMake:
#
#   c++ -std=c++17 app.cpp $(pkg-config --cflags --libs cairn)
#
# Cflags and Libs carry what Cairn::cairn carries: Cairn's headers and
# library, MPI's include directories and libraries (Cairn's headers include
# <mpi.h>) and the definitions that keep the MPI C++ bindings out; so a plain
# C++ compiler works as well as mpicxx. HDF5 is private to a shared libcairn
# (Libs.private, for `pkg-config --static`) and public for a static one.
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

  string(STRIP "${MPI_C_LINK_FLAGS}" mpi_link_flags)
  separate_arguments(mpi_link_flags UNIX_COMMAND "${mpi_link_flags}")
  _cairn_pc_libs(mpi_libs ${mpi_link_flags} ${MPI_C_LIBRARIES})
  _cairn_pc_libs(hdf5_libs ${HDF5_C_LIBRARIES})
  if(BUILD_SHARED_LIBS)
    set(CAIRN_PC_LIBS "${mpi_libs}")
    set(CAIRN_PC_LIBS_PRIVATE "${hdf5_libs}")
  else()
    set(CAIRN_PC_LIBS "${mpi_libs}${hdf5_libs}")
    set(CAIRN_PC_LIBS_PRIVATE "")
  endif()

  configure_file("${PROJECT_SOURCE_DIR}/cmake/cairn.pc.in" "${PROJECT_BINARY_DIR}/cairn.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/cairn.pc" DESTINATION "${pcdir}")
endfunction()

cairn_install_pkg_config()

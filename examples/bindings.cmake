# Examples of the language bindings (included from examples/CMakeLists.txt).
# heat2d_f, the Fortran port of heat2d, and its cross-language restart tests;
# its executable goes to <build>/examples/heat2d_f, so its build directory
# needs another name.
if(CAIRN_HAVE_FORTRAN AND CAIRN_HAVE_MPI_F08)
  add_subdirectory(heat2d_f ${CMAKE_CURRENT_BINARY_DIR}/heat2d_f-build)
endif()

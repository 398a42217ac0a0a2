# Tests of the C API and of the Fortran module (included from
# tests/CMakeLists.txt; CAIRN_HAVE_FORTRAN comes from cmake/CairnBindings.cmake).
add_subdirectory(capi)
if(CAIRN_HAVE_FORTRAN AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/fortran/CMakeLists.txt)
  add_subdirectory(fortran)
endif()

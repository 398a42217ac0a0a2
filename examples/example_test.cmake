# cairn_add_example(<name> SOURCES <src>... NP <n> EXPECT <line>...)
#
# Builds the example executable <name> (target example_<name>, in
# <build>/examples/<name>/) and, with BUILD_TESTING, registers the CTest test
# examples.<name>: `mpiexec -n <n> <name> <build>/examples/<name>/ckpt`,
# which passes only when the program exits with status 0 AND its output
# contains every <line> as a whole line (check_example.cmake). PROCESSORS <n>
# keeps `ctest -j` from oversubscribing.
set(CAIRN_CHECK_EXAMPLE ${CMAKE_CURRENT_LIST_DIR}/check_example.cmake)

function(cairn_add_example name)
  cmake_parse_arguments(E "" "NP" "SOURCES;EXPECT" ${ARGN})
  set(target example_${name})
  add_executable(${target} ${E_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${name})
  target_link_libraries(${target} PRIVATE Cairn::cairn)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra)
    if(CAIRN_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
  if(NOT BUILD_TESTING)
    return()
  endif()
  list(LENGTH E_EXPECT n_expect)
  add_test(NAME examples.${name}
    COMMAND ${CMAKE_COMMAND} -P ${CAIRN_CHECK_EXAMPLE} ${n_expect} ${E_EXPECT}
            ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${E_NP} ${CAIRN_MPIEXEC_FLAGS}
            $<TARGET_FILE:${target}> ${CMAKE_CURRENT_BINARY_DIR}/ckpt)
  set_tests_properties(examples.${name} PROPERTIES PROCESSORS ${E_NP} TIMEOUT 300 LABELS examples
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()

# cairn_add_example(<name> SOURCES <src>... NP <n> EXPECT <line>...
#                   [CHECKPOINT <file name>] [LIBS <target>...])
#
# Builds the example executable <name> (target example_<name>, in
# <build>/examples/<name>/, linked to Cairn::cairn or else to LIBS) and,
# with BUILD_TESTING, registers the CTest test examples.<name>:
# `mpiexec -n <n> <name> <build>/examples/<name>/<CHECKPOINT>` (default
# `ckpt`), which passes only when the program exits with status 0 AND its
# output contains every <line> as a whole line (check_example.cmake).
# PROCESSORS <n> keeps `ctest -j` from oversubscribing. The test is the
# setup of the fixture examples.<name>, for tests that inspect its checkpoint
# (cairn_add_example_check).
set(CAIRN_CHECK_EXAMPLE ${CMAKE_CURRENT_LIST_DIR}/check_example.cmake)

function(cairn_add_example name)
  cmake_parse_arguments(E "" "NP;CHECKPOINT" "SOURCES;EXPECT;LIBS" ${ARGN})
  if(NOT E_CHECKPOINT)
    set(E_CHECKPOINT ckpt)
  endif()
  if(NOT E_LIBS)
    set(E_LIBS Cairn::cairn)
  endif()
  set(target example_${name})
  add_executable(${target} ${E_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${name})
  target_link_libraries(${target} PRIVATE ${E_LIBS})
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
            $<TARGET_FILE:${target}> ${CMAKE_CURRENT_BINARY_DIR}/${E_CHECKPOINT})
  set_tests_properties(examples.${name} PROPERTIES PROCESSORS ${E_NP} TIMEOUT 300 LABELS examples
    FIXTURES_SETUP examples.${name}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()

# cairn_add_example_check(<name> <check> EXPECT <line>... COMMAND <command>...)
#
# Registers the CTest test examples.<name>.<check>, run after examples.<name>
# (its fixture): passes only when <command> (a serial program, e.g. h5dump on
# the example's checkpoint) exits with status 0 and prints every <line> as a
# whole line.
function(cairn_add_example_check name check)
  cmake_parse_arguments(C "" "" "EXPECT;COMMAND" ${ARGN})
  if(NOT BUILD_TESTING)
    return()
  endif()
  list(LENGTH C_EXPECT n_expect)
  add_test(NAME examples.${name}.${check}
    COMMAND ${CMAKE_COMMAND} -P ${CAIRN_CHECK_EXAMPLE} ${n_expect} ${C_EXPECT} ${C_COMMAND})
  set_tests_properties(examples.${name}.${check} PROPERTIES TIMEOUT 60 LABELS examples
    FIXTURES_REQUIRED examples.${name})
endfunction()

# cmake -DCOMPILER=... -DSOURCE=... -DINCLUDES="a;b" -DEXPECT="text1;text2" -P expect_compile_error.cmake
# Compiles SOURCE (syntax only) and fails unless the compile fails with a
# message that holds every EXPECT text.
set(_args -std=c++17 -fsyntax-only)
foreach(_dir IN LISTS INCLUDES)
  list(APPEND _args -I${_dir})
endforeach()
execute_process(COMMAND ${COMPILER} ${_args} ${SOURCE} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but must not")
endif()
foreach(_text IN LISTS EXPECT)
  string(FIND "${_out}" "${_text}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "the compiler's error for ${SOURCE} lacks '${_text}':\n${_out}")
  endif()
endforeach()
message(STATUS "the compile failed as expected, naming: ${EXPECT}")

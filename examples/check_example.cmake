# Runs an example and checks it: used by cairn_add_example (example_test.cmake).
#
#   cmake -P check_example.cmake <n> <line_1> ... <line_n> <command> [<arg>...]
#
# Fails unless <command> exits with status 0 and every <line_i> appears as a
# whole line of its output (stdout and stderr). Shows the output either way.
set(first 3) # CMAKE_ARGV0..2 are cmake, -P and this script
if(CMAKE_ARGC LESS 5)
  message(FATAL_ERROR "usage: cmake -P check_example.cmake <n> <line>... <command> [<arg>...]")
endif()
set(n ${CMAKE_ARGV${first}})
math(EXPR cmd_start "${first} + 1 + ${n}")
set(expected "")
math(EXPR last_line "${cmd_start} - 1")
if(n GREATER 0)
  foreach(i RANGE 4 ${last_line})
    list(APPEND expected "${CMAKE_ARGV${i}}")
  endforeach()
endif()
set(command "")
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${cmd_start} ${last})
  list(APPEND command "${CMAKE_ARGV${i}}")
endforeach()

string(REPLACE ";" " " shown "${command}")
message("+ ${shown}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")

set(failed FALSE)
if(NOT rc STREQUAL "0")
  message("check_example: FAIL: exit status ${rc}")
  set(failed TRUE)
endif()
foreach(line IN LISTS expected)
  string(FIND "\n${out}\n" "\n${line}\n" pos)
  if(pos EQUAL -1)
    message("check_example: FAIL: missing line: ${line}")
    set(failed TRUE)
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "check_example: the example failed")
endif()
list(LENGTH expected n_found)
message("check_example: PASS (exit status 0, ${n_found} expected lines found)")

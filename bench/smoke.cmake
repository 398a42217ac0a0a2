# Runs cairn_bench at a tiny size and checks that its output is well formed:
# it ends with "cairn_bench: done", prints ratio lines of the form
# `ratio <workload> <case>/<baseline> <number>` and no ERROR line.
file(REMOVE_RECURSE ${DIR})
execute_process(
  COMMAND ${MPIEXEC} ${NPFLAG} 2 ${MPIFLAGS} ${EXE} --size-mib 8 --runs 1 --small-arrays 200
          --plan-ranks 64 --plan-arrays 20 --no-fio --no-drop-caches --dir ${DIR}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(REMOVE_RECURSE ${DIR})
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cairn_bench exited with ${rc}: ${err}")
endif()
if(NOT out MATCHES "cairn_bench: done")
  message(FATAL_ERROR "cairn_bench did not finish")
endif()
if(out MATCHES "ERROR")
  message(FATAL_ERROR "cairn_bench reported an error")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(good 0)
foreach(line IN LISTS lines)
  if(line MATCHES "^ratio ")
    if(NOT line MATCHES "^ratio [A-Za-z0-9_.+-]+ [A-Za-z0-9_.+-]+/[A-Za-z0-9_.+-]+ -?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$")
      message(FATAL_ERROR "malformed ratio line: '${line}'")
    endif()
    math(EXPR good "${good} + 1")
  endif()
endforeach()
if(good LESS 10)
  message(FATAL_ERROR "only ${good} ratio lines")
endif()
message("bench_smoke: ${good} well-formed ratio lines")

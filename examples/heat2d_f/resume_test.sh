#!/usr/bin/env bash
# Periodic checkpoints through a checkpoint manager, then --resume, across
# programs and rank counts: a straight run of STEPS steps must give the same
# digest as MID steps with --checkpoint-every EVERY --checkpoint-dir DIR by
# one program, then --resume DIR up to STEPS by another (or the same)
# program on another number of ranks, which must say where it resumed from.
#
# usage: resume_test.sh [OPTIONS] WORKDIR NX NY STEPS MID EVERY \
#            STRAIGHT_EXE NP_STRAIGHT FIRST_EXE NP_FIRST RESUME_EXE NP_RESUME \
#            MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
#
# OPTIONS (before WORKDIR):
#   --arg ARG      pass ARG to the first and the resuming run (repeatable);
#                  "@WORKDIR@" in it becomes WORKDIR
#   --between CMD  run CMD (bash) between the two runs, "@WORKDIR@" replaced
#   --expect RE    the resuming run's output (standard output or error) must
#                  match RE (grep -E; default "resumed from .* at step ")
# WORKDIR is emptied and used for the outputs and the checkpoints.
set -euo pipefail

args=() between="" expect="resumed from .* at step "
while [ "$#" -gt 0 ]; do
    case $1 in
        --arg) args+=("$2"); shift 2 ;;
        --between) between=$2; shift 2 ;;
        --expect) expect=$2; shift 2 ;;
        *) break ;;
    esac
done
if [ "$#" -lt 14 ]; then
    sed -n '2,19p' "$0" >&2
    exit 2
fi
workdir=$1 nx=$2 ny=$3 steps=$4 mid=$5 every=$6
straight_exe=$7 np_straight=$8 first_exe=$9 np_first=${10} resume_exe=${11} np_resume=${12}
mpiexec=${13} numproc_flag=${14}
shift 14
mpiexec_flags=("$@")
args=("${args[@]//@WORKDIR@/$workdir}")
between=${between//@WORKDIR@/$workdir}

# shellcheck source=examples/heat2d/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../heat2d/test_lib.sh"
prepare_workdir

grid=(--nx "$nx" --ny "$ny")
run straight "$np_straight" "$straight_exe" "${grid[@]}" --steps "$steps"
run first "$np_first" "$first_exe" "${grid[@]}" --steps "$mid" --checkpoint-every "$every" \
    --checkpoint-dir "$workdir/run" "${args[@]}"
if [ -n "$between" ]; then
    echo "+ $between"
    bash -c "$between"
fi
run resumed "$np_resume" "$resume_exe" "${grid[@]}" --steps "$steps" --checkpoint-every "$every" \
    --resume "$workdir/run" "${args[@]}"
grep -Eq "$expect" "$workdir/resumed.log" "$workdir/resumed.log.err" ||
    fail "the resumed run does not say '$expect'"
check_same_digest straight resumed
echo "PASS: digest $digest"

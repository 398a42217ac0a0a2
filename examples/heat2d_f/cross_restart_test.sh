#!/usr/bin/env bash
# Cross-language restart test of heat2d (C++) and heat2d_f (Fortran): a
# straight run of STEPS steps must give the same digest as MID steps by one
# program with --checkpoint, then --restart by another (or the same) program
# on another number of ranks up to STEPS.
#
# usage: cross_restart_test.sh WORKDIR NX NY STEPS MID \
#            STRAIGHT_EXE NP_STRAIGHT FIRST_EXE NP_FIRST RESTART_EXE NP_RESTART \
#            MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
#
# WORKDIR is emptied and used for the outputs and the checkpoint; give each
# test its own so that `ctest -j` is safe.
set -euo pipefail

if [ "$#" -lt 13 ]; then
    sed -n '2,12p' "$0" >&2
    exit 2
fi
workdir=$1 nx=$2 ny=$3 steps=$4 mid=$5
straight_exe=$6 np_straight=$7 first_exe=$8 np_first=$9 restart_exe=${10} np_restart=${11}
mpiexec=${12} numproc_flag=${13}
shift 13
mpiexec_flags=("$@")

# shellcheck source=examples/heat2d/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../heat2d/test_lib.sh"
prepare_workdir
ckpt=$workdir/ckpt

grid=(--nx "$nx" --ny "$ny")
run straight "$np_straight" "$straight_exe" "${grid[@]}" --steps "$steps"
run first "$np_first" "$first_exe" "${grid[@]}" --steps "$mid" --checkpoint "$ckpt"
run restart "$np_restart" "$restart_exe" "${grid[@]}" --steps "$steps" --restart "$ckpt"

straight=$(digest_of straight) restarted=$(digest_of restart)
echo "straight  ($(basename "$straight_exe"), $np_straight ranks, $steps steps): digest ${straight:-<missing>}"
echo "restarted ($(basename "$first_exe") on $np_first ranks to $mid, then $(basename "$restart_exe") on $np_restart ranks to $steps): digest ${restarted:-<missing>}"
output_has restart "at step $mid on $np_restart ranks" ||
    fail "the restarted run did not report restarting at step $mid on $np_restart ranks"
check_same_digest straight restart
echo "PASS: digests match"

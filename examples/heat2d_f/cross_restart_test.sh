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

rm -rf "$workdir"
mkdir -p "$workdir"
ckpt=$workdir/ckpt

# run NAME EXE NP ARGS...: runs EXE, shows and keeps its output in WORKDIR/NAME.log
run() {
    local name=$1 exe=$2 n=$3
    shift 3
    local log=$workdir/$name.log
    echo "+ $mpiexec $numproc_flag $n ${mpiexec_flags[*]} $exe $*"
    local rc=0
    "$mpiexec" "$numproc_flag" "$n" "${mpiexec_flags[@]}" "$exe" "$@" >"$log" 2>&1 || rc=$?
    sed 's/^/  | /' "$log"
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $name exited with status $rc"
        exit 1
    fi
}

# digest_of NAME: the digest on the last `digest` line of NAME's output
digest_of() {
    awk '$1 == "digest" && length($2) == 16 && $2 ~ /^[0-9a-f]+$/ { d = $2 } END { print d }' "$workdir/$1.log"
}

grid=(--nx "$nx" --ny "$ny")
run straight "$straight_exe" "$np_straight" "${grid[@]}" --steps "$steps"
run first "$first_exe" "$np_first" "${grid[@]}" --steps "$mid" --checkpoint "$ckpt"
run restart "$restart_exe" "$np_restart" "${grid[@]}" --steps "$steps" --restart "$ckpt"

straight=$(digest_of straight)
restarted=$(digest_of restart)
echo "straight  ($(basename "$straight_exe"), $np_straight ranks, $steps steps): digest ${straight:-<missing>}"
echo "restarted ($(basename "$first_exe") on $np_first ranks to $mid, then $(basename "$restart_exe") on $np_restart ranks to $steps): digest ${restarted:-<missing>}"

if [ -z "$straight" ] || [ -z "$restarted" ]; then
    echo "FAIL: a digest line is missing"
    exit 1
fi
if ! grep -q "at step $mid on $np_restart ranks" "$workdir/restart.log"; then
    echo "FAIL: the restarted run did not report restarting at step $mid on $np_restart ranks"
    exit 1
fi
if [ "$straight" != "$restarted" ]; then
    echo "FAIL: digests differ"
    exit 1
fi
echo "PASS: digests match"

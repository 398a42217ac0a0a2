#!/usr/bin/env bash
# Restart equivalence test of heat2d: a straight run of STEPS steps on NP
# ranks must give the same digest as MID steps on NP ranks with --checkpoint,
# then --restart on NP_RESTART ranks up to STEPS.
#
# usage: restart_test.sh WORKDIR HEAT2D NX NY STEPS MID NP NP_RESTART \
#                        MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
#
# WORKDIR is emptied and used for the outputs and the checkpoint; give each
# test its own so that `ctest -j` is safe.
set -euo pipefail

if [ "$#" -lt 10 ]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
workdir=$1 heat2d=$2 nx=$3 ny=$4 steps=$5 mid=$6 np=$7 np_restart=$8 mpiexec=$9 numproc_flag=${10}
shift 10
mpiexec_flags=("$@")

rm -rf "$workdir"
mkdir -p "$workdir"
ckpt=$workdir/ckpt

# run NAME NP ARGS...: runs heat2d, shows and keeps its output in WORKDIR/NAME.log
run() {
    local name=$1 n=$2
    shift 2
    local log=$workdir/$name.log
    echo "+ $mpiexec $numproc_flag $n ${mpiexec_flags[*]} $heat2d $*"
    local rc=0
    "$mpiexec" "$numproc_flag" "$n" "${mpiexec_flags[@]}" "$heat2d" "$@" >"$log" 2>&1 || rc=$?
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
run straight "$np" "${grid[@]}" --steps "$steps"
run first "$np" "${grid[@]}" --steps "$mid" --checkpoint "$ckpt"
run restart "$np_restart" "${grid[@]}" --steps "$steps" --restart "$ckpt"

straight=$(digest_of straight)
restarted=$(digest_of restart)
echo "straight  ($np ranks, $steps steps):                 digest ${straight:-<missing>}"
echo "restarted ($np ranks to $mid, then $np_restart ranks to $steps): digest ${restarted:-<missing>}"

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

#!/usr/bin/env bash
# Restart equivalence test of heat2d: a straight run of STEPS steps on NP
# ranks must give the same digest as MID steps on NP ranks with --checkpoint,
# then --restart on NP_RESTART ranks up to STEPS.
#
# usage: restart_test.sh [OPTIONS] WORKDIR HEAT2D NX NY STEPS MID NP NP_RESTART \
#                        MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
#
# WORKDIR is emptied and used for the outputs and the checkpoint; give each
# test its own so that `ctest -j` is safe. OPTIONS (before WORKDIR):
#   --restart-binary BIN  restart with BIN instead of HEAT2D (checkpoints of one
#                         program restarted by another, e.g. heat2d_kokkos)
#   --arg ARG             pass ARG to the straight and first runs (repeatable)
#   --restart-arg ARG     pass ARG to the restart run (repeatable)
#   --async-first         the first run goes on to STEPS, saving at step MID with
#                         --checkpoint-step MID --async while it keeps stepping
#   --checkpoint-name N   name of the checkpoint in WORKDIR (default: ckpt); a
#                         name ending in .h5 selects the container layout, and
#                         the test checks that the checkpoint is one file
#   --expect-files N      the checkpoint (per-rank layout) must hold exactly N
#                         .distcp data files (e.g. with --arg --files --arg 2)
set -euo pipefail

restart_binary="" first_args=() restart_args=() async_first=0 ckpt_name=ckpt expect_files=""
while [ "$#" -gt 0 ]; do
    case $1 in
        --restart-binary) [ "$#" -ge 2 ] || { echo "restart_test.sh: $1 needs a value" >&2; exit 2; }; restart_binary=$2; shift 2 ;;
        --arg) [ "$#" -ge 2 ] || { echo "restart_test.sh: $1 needs a value" >&2; exit 2; }; first_args+=("$2"); shift 2 ;;
        --async-first) async_first=1; shift ;;
        --checkpoint-name) [ "$#" -ge 2 ] || { echo "restart_test.sh: $1 needs a value" >&2; exit 2; }; ckpt_name=$2; shift 2 ;;
        --expect-files) [ "$#" -ge 2 ] || { echo "restart_test.sh: $1 needs a value" >&2; exit 2; }; expect_files=$2; shift 2 ;;
        --restart-arg) [ "$#" -ge 2 ] || { echo "restart_test.sh: $1 needs a value" >&2; exit 2; }; restart_args+=("$2"); shift 2 ;;
        *) break ;;
    esac
done

if [ "$#" -lt 10 ]; then
    sed -n '2,21p' "$0" >&2
    exit 2
fi
workdir=$1 heat2d=$2 nx=$3 ny=$4 steps=$5 mid=$6 np=$7 np_restart=$8 mpiexec=$9 numproc_flag=${10}
shift 10
mpiexec_flags=("$@")
restart_binary=${restart_binary:-$heat2d}

rm -rf "$workdir"
mkdir -p "$workdir"
ckpt=$workdir/$ckpt_name

# run NAME NP BINARY ARGS...: runs BINARY, shows and keeps its standard output
# in WORKDIR/NAME.log and its standard error in WORKDIR/NAME.err; the last line
# of the standard output must be the digest (the contract of heat2d).
run() {
    local name=$1 n=$2 binary=$3
    shift 3
    local log=$workdir/$name.log
    echo "+ $mpiexec $numproc_flag $n ${mpiexec_flags[*]} $binary $*"
    local rc=0
    "$mpiexec" "$numproc_flag" "$n" "${mpiexec_flags[@]}" "$binary" "$@" >"$log" 2>"$log.err" || rc=$?
    sed 's/^/  | /' "$log"
    sed 's/^/  ! /' "$log.err"
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $name exited with status $rc"
        exit 1
    fi
    if ! tail -n 1 "$log" | grep -qE '^digest [0-9a-f]{16}$'; then
        echo "FAIL: the last line of $name's output is not 'digest <16 lowercase hex digits>'"
        exit 1
    fi
}

# digest_of NAME: the digest on the last `digest` line of NAME's output
digest_of() {
    awk '$1 == "digest" && length($2) == 16 && $2 ~ /^[0-9a-f]+$/ { d = $2 } END { print d }' "$workdir/$1.log"
}

grid=(--nx "$nx" --ny "$ny")
run straight "$np" "$heat2d" "${grid[@]}" --steps "$steps" ${first_args[@]+"${first_args[@]}"}
if [ "$async_first" = 1 ]; then
    run first "$np" "$heat2d" "${grid[@]}" --steps "$steps" --checkpoint "$ckpt" --checkpoint-step "$mid" --async \
        ${first_args[@]+"${first_args[@]}"}
    if [ "$(digest_of first)" != "$(digest_of straight)" ]; then
        echo "FAIL: the run that saved in the background did not end with the straight run's digest"
        exit 1
    fi
else
    run first "$np" "$heat2d" "${grid[@]}" --steps "$mid" --checkpoint "$ckpt" ${first_args[@]+"${first_args[@]}"}
fi
case $ckpt_name in
    *.h5)
        if [ ! -f "$ckpt" ]; then
            echo "FAIL: $ckpt is not one file (the container layout was not used)"
            exit 1
        fi ;;
esac
if [ -n "$expect_files" ]; then
    found=$(find "$ckpt" -maxdepth 1 -name '*.distcp' | wc -l)
    if [ "$found" -ne "$expect_files" ]; then
        echo "FAIL: $ckpt holds $found .distcp files, not $expect_files:"
        ls "$ckpt"
        exit 1
    fi
    echo "$ckpt holds $found .distcp files, as expected"
fi
run restart "$np_restart" "$restart_binary" "${grid[@]}" --steps "$steps" --restart "$ckpt" \
    ${restart_args[@]+"${restart_args[@]}"}

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

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

# shellcheck source=examples/heat2d/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"
prepare_workdir
ckpt=$workdir/$ckpt_name

grid=(--nx "$nx" --ny "$ny")
run straight "$np" "$heat2d" "${grid[@]}" --steps "$steps" ${first_args[@]+"${first_args[@]}"}
if [ "$async_first" = 1 ]; then
    run first "$np" "$heat2d" "${grid[@]}" --steps "$steps" --checkpoint "$ckpt" --checkpoint-step "$mid" --async \
        ${first_args[@]+"${first_args[@]}"}
    if [ "$(digest_of first)" != "$(digest_of straight)" ]; then
        fail "the run that saved in the background did not end with the straight run's digest"
    fi
else
    run first "$np" "$heat2d" "${grid[@]}" --steps "$mid" --checkpoint "$ckpt" ${first_args[@]+"${first_args[@]}"}
fi
case $ckpt_name in
    *.h5)
        [ -f "$ckpt" ] || fail "$ckpt is not one file (the container layout was not used)" ;;
esac
if [ -n "$expect_files" ]; then
    [ -d "$ckpt" ] || fail "$ckpt is not a directory (the per-rank layout was not used)"
    found=$(find "$ckpt" -maxdepth 1 -name '*.distcp' | wc -l)
    if [ "$found" -ne "$expect_files" ]; then
        ls "$ckpt"
        fail "$ckpt holds $found .distcp files, not $expect_files (listed above)"
    fi
    echo "$ckpt holds $found .distcp files, as expected"
fi
run restart "$np_restart" "$restart_binary" "${grid[@]}" --steps "$steps" --restart "$ckpt" \
    ${restart_args[@]+"${restart_args[@]}"}

straight=$(digest_of straight) restarted=$(digest_of restart)
echo "straight  ($np ranks, $steps steps):                 digest ${straight:-<missing>}"
echo "restarted ($np ranks to $mid, then $np_restart ranks to $steps): digest ${restarted:-<missing>}"
output_has restart "at step $mid on $np_restart ranks" ||
    fail "the restarted run did not report restarting at step $mid on $np_restart ranks"
check_same_digest straight restart
echo "PASS: digests match"

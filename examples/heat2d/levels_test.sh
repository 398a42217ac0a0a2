#!/usr/bin/env bash
# Node-local restart test of heat2d: a straight run of STEPS steps on NP ranks
# must give the same digest as MID steps on NP ranks with periodic
# checkpoints on fake node-local storage (one node per rank), one node's
# directory wiped, then --resume on NP_RESTART ranks up to STEPS; the resume
# must come from node-local storage, with that node's files rebuilt.
#
# usage: levels_test.sh WORKDIR HEAT2D REDUNDANCY NX NY STEPS MID EVERY NP NP_RESTART WIPE \
#                       MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
#
# REDUNDANCY: partner, xor or xor:K; WIPE: the node whose directory is removed
# (-1: none). OPTIONS (before WORKDIR), for real (or simulated) hosts:
#   --local-dir DIR   the node-local directory (default: WORKDIR/node%n, with
#                     --ranks-per-node 1)
#   --wipe-command C  how node WIPE's storage is lost (default: rm -rf of its
#                     WORKDIR/node<WIPE>), e.g. "cairn-hosts wipe host2"
#   --async           both checkpointing runs save with --async (staged, then
#                     written, made redundant and drained in the background)
set -euo pipefail

local_dir="" wipe_command="" async=()
while [ "$#" -gt 0 ]; do
    case $1 in
        --local-dir) local_dir=$2; shift 2 ;;
        --wipe-command) wipe_command=$2; shift 2 ;;
        --async) async=(--async); shift ;;
        *) break ;;
    esac
done

if [ "$#" -lt 13 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
workdir=$1 heat2d=$2 redundancy=$3 nx=$4 ny=$5 steps=$6 mid=$7 every=$8 np=$9 np_restart=${10} wipe=${11}
mpiexec=${12} numproc_flag=${13}
shift 13
mpiexec_flags=("$@")

# shellcheck source=examples/heat2d/test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"
prepare_workdir

grid=(--nx "$nx" --ny "$ny")
if [ -z "$local_dir" ]; then
    levels=(--local-dir "$workdir/node%n" --redundancy "$redundancy" --ranks-per-node 1)
else
    levels=(--local-dir "$local_dir" --redundancy "$redundancy")
fi
run straight "$np" "$heat2d" "${grid[@]}" --steps "$steps"
run first "$np" "$heat2d" "${grid[@]}" --steps "$mid" --checkpoint-every "$every" --checkpoint-dir "$workdir/root" \
    "${levels[@]}" ${async[@]+"${async[@]}"}
for n in $( [ -z "$local_dir" ] && seq 0 $((np - 1)) ); do
    [ -f "$workdir/node$n/step_$(printf %08d "$mid")/.cairn-level.json" ] ||
        fail "node $n holds no committed node-local step $mid"
done
if [ "$wipe" -ge 0 ]; then
    wipe_command=${wipe_command:-rm -rf $workdir/node$wipe}
    echo "+ $wipe_command"
    $wipe_command
fi
run resumed "$np_restart" "$heat2d" "${grid[@]}" --steps "$steps" --checkpoint-every "$every" --resume "$workdir/root" \
    "${levels[@]}" ${async[@]+"${async[@]}"}

output_has resumed "^resumed from node-local storage .* at step $mid " ||
    fail "the resumed run did not restart from node-local storage at step $mid"
if [ "$wipe" -ge 0 ] && grep -q "(0 files rebuilt" "$workdir/resumed.log"; then
    fail "node $wipe was wiped but no file was rebuilt"
fi
check_same_digest straight resumed
echo "PASS: digest $digest (node-local${async[@]+ async}, $redundancy, node $wipe wiped, $np -> $np_restart ranks)"

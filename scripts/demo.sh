#!/usr/bin/env bash
# Cairn demo: sets up and builds (scripts/setup.sh), then runs the heat2d
# example three times on a 256 x 192 grid:
#   1. 200 steps straight on 4 ranks;
#   2. 100 steps on 4 ranks, saving a checkpoint to build/demo/ckpt;
#   3. a restart from that checkpoint on 3 ranks, up to step 200;
# and checks that runs 1 and 3 end with the same digest (exit 1 if not).
# Finally it shows the checkpoint: the per-rank .distcp files and metadata.h5.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"   # cds to the repo root

heat2d=build/examples/heat2d
demo=build/demo
ckpt=$demo/ckpt
grid=(--nx 256 --ny 192)

mpiexec=(mpiexec)
if mpiexec --version 2>&1 | grep -qE 'Open MPI|OpenRTE'; then
    # More ranks than cores is fine for a demo.
    mpiexec+=(--oversubscribe)
fi

rm -rf "$demo"
mkdir -p "$demo"

# run NAME NP ARGS...: runs heat2d on NP ranks, shows its output, keeps it in $demo/NAME.log
run() {
    local name=$1 np=$2
    shift 2
    echo
    echo "\$ ${mpiexec[*]} -n $np $heat2d $*"
    "${mpiexec[@]}" -n "$np" "$heat2d" "$@" 2>&1 | tee "$demo/$name.log"
}
digest_of() {
    awk '$1 == "digest" { d = $2 } END { print d }' "$demo/$1.log"
}

echo "== 1. 200 steps straight on 4 ranks"
run straight 4 "${grid[@]}" --steps 200
echo
echo "== 2. 100 steps on 4 ranks, then checkpoint"
run first 4 "${grid[@]}" --steps 100 --checkpoint "$ckpt"
echo
echo "== 3. restart on 3 ranks, up to step 200"
run restart 3 "${grid[@]}" --steps 200 --restart "$ckpt"

straight=$(digest_of straight)
restarted=$(digest_of restart)
echo
echo "straight run (4 ranks):            digest ${straight:-<missing>}"
echo "checkpoint 4 ranks -> restart 3:   digest ${restarted:-<missing>}"
if [ -n "$straight" ] && [ "$straight" = "$restarted" ]; then
    echo "MATCH: the restarted run is bitwise identical to the straight run"
    match=1
else
    echo "MISMATCH: the digests differ"
    match=0
fi

echo
echo "== the checkpoint: $ckpt"
ls -l "$ckpt"
echo
echo "\$ h5dump -A $ckpt/metadata.h5 | head -n 60"
{ h5dump -A "$ckpt/metadata.h5" || true; } | head -n 60

[ "$match" -eq 1 ] || exit 1

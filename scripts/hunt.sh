#!/usr/bin/env bash
# A bounded adversarial campaign against Cairn, longer than the test suite's
# runs of the same tests (docs/robustness.md, "Hunting"): in build/ (set up
# as scripts/setup.sh does),
#
#   kill      heat2d SIGKILLed in its saves and resumed (tests/crash/kill_test.py)
#   disk      saves on a small tmpfs that fills up (tests/crash/full_disk_test.py;
#             root and unshare(1), else skipped)
#   random    randomised N -> M round trips at 2-4 ranks (CAIRN_RANDOM_CASES)
#   faults    every injected I/O fault at 2-4 ranks ([faults])
#   hostile   damaged and hostile checkpoints at 1-4 ranks ([bad_input], [hostile])
#   fuzz      the decoders' libFuzzer targets (scripts/fuzz.sh)
#
#   scripts/hunt.sh [PART...]          (default: all of them)
#
# CAIRN_HUNT_SCALE (default 10) multiplies each part's rounds over the suite's
# (kill rounds, full-disk rounds, random cases, fuzzing seconds); seeds are
# printed by each part. Exits non-zero when any part failed, after running all.
set -uo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" # cds to the repo root, builds build/

scale=${CAIRN_HUNT_SCALE:-10}
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(kill disk random faults hostile fuzz)
mpiexec=(mpiexec --oversubscribe)
status=0

run() { # NAME COMMAND...
    local name=$1
    shift
    echo "== hunt: $name: $*"
    local t0=$SECONDS
    "$@"
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "== hunt: $name: passed in $((SECONDS - t0)) s"
    elif [ "$rc" -eq 77 ]; then
        echo "== hunt: $name: skipped (see its reason above)"
    else
        echo "== hunt: $name: FAILED (exit $rc) after $((SECONDS - t0)) s"
        status=1
    fi
}

for part in "${parts[@]}"; do
    case "$part" in
    kill)
        run kill python3 tests/crash/kill_test.py --heat2d build/examples/heat2d \
            --checker build/tests/crash/cairn_check_root --workdir build/hunt/kill \
            --rounds $((10 * scale)) --min-rounds $((4 * scale)) --budget $((90 * scale)) \
            -- "${mpiexec[0]}" -n "${mpiexec[@]:1}" ;;
    disk)
        run disk python3 tests/crash/full_disk_test.py --heat2d build/examples/heat2d \
            --checker build/tests/crash/cairn_check_root --cairn build/bin/cairn \
            --workdir build/hunt/disk --rounds $((8 * scale)) \
            -- "${mpiexec[0]}" -n "${mpiexec[@]:1}" ;;
    random)
        for np in 2 3 4; do
            run "random np$np" bash -c "cd build/tests && CAIRN_RANDOM_CASES=$((40 * scale)) \
                ${mpiexec[*]} -n $np ./cairn_mpi_tests '[random]'"
        done ;;
    faults)
        for np in 2 3 4; do
            run "faults np$np" bash -c "cd build/tests && ${mpiexec[*]} -n $np ./cairn_mpi_tests '[faults]'"
        done ;;
    hostile)
        for np in 1 2 3 4; do
            run "hostile np$np" bash -c "cd build/tests && ${mpiexec[*]} -n $np ./cairn_mpi_tests '[bad_input],[hostile]'"
        done ;;
    fuzz)
        run fuzz env CAIRN_FUZZ_SECONDS=$((15 * scale)) scripts/fuzz.sh ;;
    *)
        echo "hunt.sh: unknown part '$part' (kill disk random faults hostile fuzz)" >&2
        status=2 ;;
    esac
done
exit "$status"

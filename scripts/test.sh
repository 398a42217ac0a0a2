#!/usr/bin/env bash
# Sets up and builds Cairn (scripts/setup.sh), then runs its tests with ctest.
# Extra arguments go to ctest, e.g. `scripts/test.sh -R heat2d`. Without
# them, also runs the bounded fuzzing of scripts/fuzz.sh (clang build) and the
# tests again against MPICH (scripts/test-mpich.sh).
# Exits with ctest's status.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"   # cds to the repo root

rc=0
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@" || rc=$?
# Bounded libFuzzer runs in a clang build (build-fuzz/), on full runs only;
# CAIRN_SKIP_FUZZ=1 skips them.
if [ "$#" -eq 0 ] && [ "${CAIRN_SKIP_FUZZ:-0}" != 1 ]; then
    scripts/fuzz.sh || rc=$?
fi
# The same tests built against MPICH (build-mpich/), on full runs only;
# CAIRN_SKIP_MPICH=1 skips them.
if [ "$#" -eq 0 ] && [ "${CAIRN_SKIP_MPICH:-0}" != 1 ]; then
    scripts/test-mpich.sh || rc=$?
fi
exit "$rc"

#!/usr/bin/env bash
# Sets up and builds Cairn (scripts/setup.sh), then runs its tests with ctest.
# Extra arguments go to ctest, e.g. `scripts/test.sh -R heat2d`.
# Exits with ctest's status.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"   # cds to the repo root

rc=0
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@" || rc=$?
exit "$rc"

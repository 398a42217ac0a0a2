#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (with LeakSanitizer): configures a GCC build with
# CAIRN_SANITIZE=address,undefined in build-asan/ (CAIRN_SANITIZE_BUILD_DIR
# overrides; benchmarks off), builds it and runs ctest there. ctest gets the
# sanitizer options from the build (cmake/CairnSanitize.cmake: leaks inside
# Open MPI and HDF5 suppressed by tests/sanitizers/lsan.supp, nothing of
# Cairn's). Extra arguments go to ctest, e.g. `scripts/sanitize.sh -R mpi_`.
# Takes about 35 minutes on 2 cores (the tests run 5-10x slower). Not part of
# scripts/test.sh (CI); see docs/robustness.md. Exits with ctest's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
build=${CAIRN_SANITIZE_BUILD_DIR:-build-asan}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCAIRN_SANITIZE=address,undefined -DCAIRN_BUILD_BENCHMARKS=OFF
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"

#!/usr/bin/env bash
# The whole test suite under sanitizers. By default AddressSanitizer +
# UndefinedBehaviorSanitizer (with LeakSanitizer): configures a GCC build with
# CAIRN_SANITIZE=address,undefined in build-asan/, builds it and runs ctest
# there. `scripts/sanitize.sh --thread` does the same with ThreadSanitizer
# (CAIRN_SANITIZE=thread, build-tsan/). CAIRN_SANITIZE_BUILD_DIR overrides the
# directory; benchmarks are off. ctest gets the sanitizer options from the
# build (cmake/CairnSanitize.cmake: leaks inside Open MPI and HDF5 suppressed
# by tests/sanitizers/lsan.supp, reports inside Open MPI, gfortran's run-time
# and libstdc++'s exception_ptr by tests/sanitizers/tsan.supp; nothing of
# Cairn's). Further arguments go to ctest, e.g. `scripts/sanitize.sh -R mpi_`.
# Takes about 35 minutes on 2 cores (the tests run 5-10x slower). Not part of
# scripts/test.sh (CI); see docs/robustness.md. Exits with ctest's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
sanitizers=address,undefined
default_build=build-asan
if [ "${1:-}" = "--thread" ]; then
    sanitizers=thread
    default_build=build-tsan
    shift
fi
build=${CAIRN_SANITIZE_BUILD_DIR:-$default_build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCAIRN_SANITIZE=$sanitizers -DCAIRN_BUILD_BENCHMARKS=OFF
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"

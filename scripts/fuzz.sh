#!/usr/bin/env bash
# Bounded fuzzing of Cairn's decoders (fuzz/): configures a clang build with
# CAIRN_BUILD_FUZZERS=ON (ASan + UBSan) in build-fuzz/ (CAIRN_FUZZ_BUILD_DIR
# overrides), builds the libFuzzer targets and runs each for
# CAIRN_FUZZ_SECONDS seconds (default 15) through `ctest -L libfuzzer`, with
# CAIRN_FUZZ_JOBS parallel jobs (default: nproc). Crash inputs land in
# <build dir>/fuzz/artifacts/.
# Called by scripts/test.sh; skipped (exit 0) without clang and libFuzzer.
# Exits with ctest's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$probe/t.cpp"
if ! command -v clang++ >/dev/null 2>&1 || ! clang++ -fsanitize=fuzzer "$probe/t.cpp" -o "$probe/t" >/dev/null 2>&1; then
    echo "fuzz.sh: no clang++ with libFuzzer (Debian: clang libclang-rt-14-dev): skipping the fuzz runs" >&2
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
jobs=${CAIRN_FUZZ_JOBS:-$(nproc)}
build=${CAIRN_FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCAIRN_BUILD_FUZZERS=ON -DCAIRN_FUZZ_SECONDS="${CAIRN_FUZZ_SECONDS:-15}" \
    -DCAIRN_BUILD_EXAMPLES=OFF -DCAIRN_USE_FORTRAN=OFF -DCAIRN_USE_KOKKOS=OFF -DCAIRN_USE_CUDA=OFF
cmake --build "$build" -j"$jobs" --target cairn_fuzzers
ctest --test-dir "$build" --output-on-failure -j"$jobs" -L libfuzzer

#!/usr/bin/env bash
# Configure test of Cairn's build as others use it (configured only, nothing
# built):
#  1. subproject/ add_subdirectory()s the source tree: no tests, examples,
#     tool or benchmarks of Cairn's, even with the parent's BUILD_TESTING=ON;
#  2. Cairn itself with -DBUILD_TESTING=OFF and an mpiexec of another MPI
#     (a stand-in script that says it is): without tests, mpiexec is not
#     checked, so the configure succeeds.
#
# usage: subproject_test.sh --source-dir=DIR --work-dir=DIR --cmake=CMAKE
#          --mpi-kind="Open MPI"|MPICH|"" [--generator=GEN] [--cc=CC] [--cxx=CXX]
# WORK_DIR is emptied first.
set -euo pipefail

fail() {
    echo "subproject_test: FAIL: $*"
    exit 1
}

source_dir="" work_dir="" cmake="" mpi_kind="" generator="" cc="" cxx=""
while [ "$#" -gt 0 ]; do
    case $1 in
        --source-dir=*) source_dir=${1#*=} ;;
        --work-dir=*) work_dir=${1#*=} ;;
        --cmake=*) cmake=${1#*=} ;;
        --mpi-kind=*) mpi_kind=${1#*=} ;;
        --generator=*) generator=${1#*=} ;;
        --cc=*) cc=${1#*=} ;;
        --cxx=*) cxx=${1#*=} ;;
        *) sed -n '2,13p' "$0" >&2; fail "unknown argument '$1'" ;;
    esac
    shift
done
for v in source_dir work_dir cmake; do
    [ -n "${!v}" ] || fail "missing --${v//_/-}"
done
rm -rf "$work_dir"
mkdir -p "$work_dir"

# Quicker configures: the optional parts are not what is tested here.
common=(-DCAIRN_USE_CUDA=OFF -DCAIRN_USE_KOKKOS=OFF -DCAIRN_USE_FORTRAN=OFF)
[ -z "$generator" ] || common+=(-G "$generator")
[ -z "$cc" ] || common+=(-DCMAKE_C_COMPILER="$cc")
[ -z "$cxx" ] || common+=(-DCMAKE_CXX_COMPILER="$cxx")

run_checked() {
    local name=$1
    shift
    echo "+ $*"
    local rc=0
    "$@" >"$work_dir/$name.log" 2>&1 || rc=$?
    sed 's/^/  | /' "$work_dir/$name.log"
    [ "$rc" -eq 0 ] || fail "$name exited with status $rc"
}

# ---- 1. add_subdirectory ------------------------------------------------------
here=$(cd "$(dirname "$0")" && pwd)
run_checked subproject "$cmake" -S "$here/subproject" -B "$work_dir/subproject" \
    -DCAIRN_SOURCE_DIR="$source_dir" "${common[@]}"
grep -q "subproject: Cairn::cairn alone" "$work_dir/subproject.log" || fail "subproject/ did not configure"
grep -q "^BUILD_TESTING:BOOL=ON" "$work_dir/subproject/CMakeCache.txt" ||
    fail "the parent's BUILD_TESTING is not ON: the check proves nothing"

# ---- 2. BUILD_TESTING=OFF: no mpiexec check ----------------------------------------
# A stand-in mpiexec of the other MPI than Cairn's.
case $mpi_kind in
    "Open MPI") other="HYDRA build details:" ;;
    *) other="mpiexec (OpenRTE) 4.1.4" ;;
esac
printf '#!/bin/sh\necho "%s"\n' "$other" >"$work_dir/mpiexec"
chmod +x "$work_dir/mpiexec"
run_checked no-tests "$cmake" -S "$source_dir" -B "$work_dir/no-tests" -DBUILD_TESTING=OFF \
    -DMPIEXEC_EXECUTABLE="$work_dir/mpiexec" -DCAIRN_BUILD_EXAMPLES=OFF -DCAIRN_BUILD_TOOLS=OFF \
    -DCAIRN_BUILD_BENCHMARKS=OFF "${common[@]}"

echo "subproject_test: PASS"

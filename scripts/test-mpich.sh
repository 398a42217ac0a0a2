#!/usr/bin/env bash
# Builds Cairn against MPICH into build-mpich/ and runs its tests there.
# Cairn must work with any MPI; scripts/setup.sh builds it with Open MPI, this
# is the second implementation. On Debian: mpich, libmpich-dev and
# libhdf5-mpich-dev (parallel HDF5 built with MPICH), installed when missing
# (scripts/packages.sh); Open MPI stays the default (`mpicc`, `mpiexec`), so
# every MPICH tool is named explicitly: the .mpich wrappers, mpiexec.mpich
# and h5pcc.mpich. CUDA is off here (scripts/setup.sh's build compiles it).
#
#   scripts/test-mpich.sh [ctest arguments]     (e.g. -R heat2d)
#
# Without arguments it runs every test except the MPI suites and tool tests
# at 3 and 4 ranks (names ending in .np3/.np4/_np3/_np4): those run under
# Open MPI. MPICH's ch4:ucx polls without yielding, so with more ranks than
# cores (CI machines have 2) those suites take 8-10 times as long as under
# Open MPI, and would take most of CI's time. The end-to-end restarts at 3
# and 4 ranks (heat2d, heat2d_f, C and Fortran N -> M) still run under MPICH.
# `scripts/test-mpich.sh -R .` runs everything.
#
# Exits with ctest's status. scripts/test.sh runs it on full runs
# (CAIRN_SKIP_MPICH=1 skips it there).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/packages.sh
source scripts/packages.sh
cairn_ensure_packages build-essential cmake mpich libmpich-dev libhdf5-mpich-dev

tool() {   # tool NAME: the MPICH tool NAME.mpich, or a clear failure
    command -v "$1.mpich" || { echo "test-mpich.sh: $1.mpich not found (Debian's mpich packages)" >&2; exit 1; }
}
# Assignments, so that a missing tool stops the script (set -e).
mpicc=$(tool mpicc)
mpif90=$(tool mpif90)
mpiexec=$(tool mpiexec)
h5pcc=$(tool h5pcc)
cmake -S . -B build-mpich -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCAIRN_USE_CUDA=OFF \
    -DMPI_C_COMPILER="$mpicc" -DMPI_Fortran_COMPILER="$mpif90" \
    -DMPIEXEC_EXECUTABLE="$mpiexec" -DHDF5_C_COMPILER_EXECUTABLE="$h5pcc"
cmake --build build-mpich -j"$(nproc)"
if [ "$#" -eq 0 ]; then
    set -- -E '(\.|_)np[34]$'
fi
ctest --test-dir build-mpich --output-on-failure -j"$(nproc)" "$@"

#!/usr/bin/env bash
# Sets up a fresh Debian machine for Cairn and builds it into build/.
#
#   scripts/setup.sh            (or `source scripts/setup.sh` from another script)
#
# As root: installs the missing Debian packages (apt-get update once, then
# apt-get install; nothing when everything is installed) and exports
# OMPI_ALLOW_RUN_AS_ROOT / OMPI_ALLOW_RUN_AS_ROOT_CONFIRM so that Open MPI's
# mpiexec runs. As another user: lists the missing packages and fails.
# Then configures and builds: cmake -S . -B build && cmake --build build.
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail

cairn_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$cairn_root"

cairn_packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools catch2 libxxhash-dev libcli11-dev nlohmann-json3-dev python3 python3-dev python3-h5py python3-numpy python3-pytest python3-mpi4py pybind11-dev libtrilinos-kokkos-dev clang libclang-rt-14-dev)

# shellcheck source=scripts/packages.sh
source scripts/packages.sh
cairn_ensure_packages "${cairn_packages[@]}"

if [ "$(id -u)" -eq 0 ]; then
    # Open MPI refuses to run as root without these.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"

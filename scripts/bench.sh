#!/usr/bin/env bash
# Runs the benchmark suite (docs/BENCHMARKS.md) and prints its `ratio` lines.
#
#   scripts/bench.sh                 1 GiB state on 2 ranks, 1 warm-up + 3 runs (about 8-9 minutes here)
#   scripts/bench.sh --large         4 GiB state
#   scripts/bench.sh --size-mib N --runs R --np P [-- extra cairn_bench arguments]
#
# Environment: CAIRN_BENCH_DIR (scratch directory on the file system to
# measure; default /var/tmp/cairn-bench, removed at the end),
# CAIRN_BENCH_BUILD (build directory; default build-bench),
# CAIRN_BENCH_PYTHON (a python with torch 2.x for the PyTorch DCP peer
# "torch-dcp"; default python3; the peer is skipped with a message when torch
# is missing), CAIRN_BENCH_PEERS (more DCP peers, space-separated NAME=PYTHON,
# e.g. "torch113-dcp=/opt/venv-torch113/bin/python" for torch 1.13;
# docs/BENCHMARKS.md says how to install one),
# CAIRN_BENCH_LOG (full output; default $CAIRN_BENCH_BUILD/bench.log),
# CAIRN_BENCH_LOCAL_DIR (the node-local directory of the drain case, a RAM
# disk; default /dev/shm/cairn-bench-local, removed at the end).
#
# Two MPI runs: the first with Open MPI's default MPI-IO component (ompio)
# measures everything; the second with OMPI_MCA_io=romio321 repeats Cairn's
# cases, plain MPI-IO, plain HDF5 and fio (workload names get "-romio321").
# Installs fio (Debian package, as root) when it is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

size=1024
runs=3
np=2
extra=()
extra_large=()
while [ $# -gt 0 ]; do
    case $1 in
        --large) size=4096; extra_large=(--plan-ranks 4096) ;;
        --size-mib) size=$2; shift ;;
        --runs) runs=$2; shift ;;
        --np) np=$2; shift ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

if ! command -v fio >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "bench.sh: installing fio"
        DEBIAN_FRONTEND=noninteractive apt-get install -y fio >/dev/null || {
            apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y fio >/dev/null; }
    else
        echo "bench.sh: fio is missing (apt-get install fio as root): the physical-limit figures are skipped" >&2
    fi
fi
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
else
    echo "bench.sh: not root: the page cache cannot be dropped, loads are not cold" >&2
fi

build=${CAIRN_BENCH_BUILD:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCAIRN_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$build" -j2 --target cairn_bench >/dev/null

dir=${CAIRN_BENCH_DIR:-/var/tmp/cairn-bench}
python=${CAIRN_BENCH_PYTHON:-python3}
log=${CAIRN_BENCH_LOG:-$build/bench.log}
local_dir=${CAIRN_BENCH_LOCAL_DIR:-/dev/shm/cairn-bench-local}
mkdir -p "$dir"
trap 'rm -rf "$dir" "$local_dir"' EXIT
bench=("$build/bench/cairn_bench" --size-mib "$size" --runs "$runs" --dir "$dir")
peers=(--python "$python")
for peer in ${CAIRN_BENCH_PEERS:-}; do
    peers+=(--torch-peer "$peer")
done
flags=(-n "$np")
[ "$np" -gt "$(nproc)" ] && flags+=(--oversubscribe)

echo "bench.sh: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, load average $(cut -d' ' -f1-3 /proc/loadavg); log: $log"
{
    mpiexec "${flags[@]}" "${bench[@]}" "${peers[@]}" --torch-script bench/torch_dcp.py --local-dir "$local_dir" \
        "${extra_large[@]}" "${extra[@]}"
    OMPI_MCA_io=romio321 mpiexec "${flags[@]}" "${bench[@]}" --only large,mpiio,hdf5,fio "${extra[@]}"
} 2>&1 | tee "$log" | grep -E --line-buffered '^(ratio|figure|warmup|note|ERROR|workload|cairn_bench)'
echo "bench.sh: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env python3
"""PyTorch DCP peer of cairn_bench (docs/BENCHMARKS.md).

Saves and loads the same state as cairn_bench's "large" workload (four
float64 arrays of rows x cols, sharded by rows over --nproc processes, as
DTensors with Shard(0) on a CPU device mesh, gloo) through
torch.distributed.checkpoint's FileSystemWriter (sync_files=True: durable) and
FileSystemReader, with the page cache dropped before the load (as root).

Prints, from rank 0:
    torch-dcp save <seconds>
    torch-dcp load <seconds>
Exits with status 3 and a one-line message when torch is not installed.
cairn_bench runs it once per repetition, interleaved with its own cases.
"""
import argparse
import os
import shutil
import sys
import time


def layout(total_bytes, nproc, count=4):
    # The same shapes as add_large() in cairn_bench.cpp.
    cols = 131072
    while cols > 512 and cols * 8 * 2 * nproc * count > total_bytes:
        cols //= 2
    rows = total_bytes // (cols * 8 * count)
    rows = max(nproc, rows // nproc * nproc)
    return rows, cols, count


def drop_caches(enabled):
    os.sync()
    if not enabled:
        return False
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def worker(rank, args):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank, world_size=args.nproc)
    mesh = init_device_mesh("cpu", (args.nproc,))
    rows, cols, count = layout(int(args.size_mib * 1048576), args.nproc)
    per = rows // args.nproc

    def state(fill):
        sd = {}
        for k in range(count):
            if fill:
                base = torch.arange(per * cols, dtype=torch.float64).reshape(per, cols)
                local = base + float(rank * per * cols + k)
            else:
                local = torch.empty(per, cols, dtype=torch.float64)
                local.fill_(0.0)  # touched before timing
            sd["large_%d" % k] = DTensor.from_local(local, mesh, [Shard(0)], run_check=False)
        return sd

    src = state(True)
    dist.barrier()
    t0 = time.perf_counter()
    dcp.save(src, storage_writer=dcp.FileSystemWriter(args.dir, sync_files=True))
    dist.barrier()
    t_save = time.perf_counter() - t0

    dst = state(False)
    dropped = True
    if rank == 0:
        dropped = drop_caches(not args.no_drop_caches)
    dist.barrier()
    t0 = time.perf_counter()
    dcp.load(dst, storage_reader=dcp.FileSystemReader(args.dir))
    dist.barrier()
    t_load = time.perf_counter() - t0
    ok = all(torch.equal(dst[k].to_local(), src[k].to_local()) for k in src)
    if rank == 0:
        if not dropped:
            print("note: page cache not dropped: the load is not cold")
        print("torch %s, %d processes, %d arrays of %d x %d f64" % (torch.__version__, args.nproc, count, rows, cols))
        if not ok:
            print("ERROR: torch-dcp load returned different data")
        print("torch-dcp save %.6f" % t_save)
        print("torch-dcp load %.6f" % t_load)
        sys.stdout.flush()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--size-mib", type=float, default=1024)
    p.add_argument("--dir", required=True)
    p.add_argument("--no-drop-caches", action="store_true")
    args = p.parse_args()
    try:
        import torch  # noqa: F401
        import torch.distributed.checkpoint  # noqa: F401
        from torch.distributed.tensor import DTensor  # noqa: F401
    except ImportError as e:
        print("torch (2.x with torch.distributed.checkpoint and DTensor) is not installed for %s: %s"
              % (sys.executable, e))
        sys.exit(3)
    import torch.multiprocessing as mp

    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    args.store = os.path.join(os.path.dirname(os.path.abspath(args.dir)), ".torch_store_%d" % os.getpid())
    try:
        mp.spawn(worker, args=(args,), nprocs=args.nproc, join=True)
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)
        if os.path.exists(args.store):
            os.remove(args.store)


if __name__ == "__main__":
    main()

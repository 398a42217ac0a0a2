#!/usr/bin/env python3
"""PyTorch DCP peer of cairn_bench (docs/BENCHMARKS.md).

Saves and loads the same state as cairn_bench's "large" workload (four
float64 arrays of rows x cols, sharded by rows over --nproc processes, gloo)
through DCP's FileSystemWriter (one file per rank, sync_files=True: durable)
and FileSystemReader, with the page cache dropped before the load (as root).

Two generations of DCP are supported, chosen by what the torch imported has:
- torch 2.x: torch.distributed.checkpoint's save/load of DTensors with
  Shard(0) on a CPU device mesh;
- torch 1.13: torch.distributed._shard.checkpoint's save_state_dict /
  load_state_dict of ShardedTensors (one local shard per rank), the first
  release of DCP. (Debian 12's python3-torch 1.13 carries it but cannot import
  it on Debian's Python 3.11; PyPI's torch 1.13.1 runs on Python 3.10.)

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


def dcp_api(rank, rows, cols, per):
    """(wrap, to_local, save, load) for the DCP generation this torch has."""
    import torch
    import torch.distributed as dist

    try:
        import torch.distributed.checkpoint as dcp
        modern = hasattr(dcp, "save")
    except ImportError:
        modern = False
    if modern:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Shard

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        return (lambda local: DTensor.from_local(local, mesh, [Shard(0)], run_check=False),
                lambda t: t.to_local(),
                lambda sd, d: dcp.save(sd, storage_writer=dcp.FileSystemWriter(d, sync_files=True)),
                lambda sd, d: dcp.load(sd, storage_reader=dcp.FileSystemReader(d)))
    import torch.distributed._shard.checkpoint as dcp
    from torch.distributed._shard.metadata import ShardMetadata
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards

    def wrap(local):
        meta = ShardMetadata(shard_offsets=[rank * per, 0], shard_sizes=[per, cols], placement="rank:%d/cpu" % rank)
        return init_from_local_shards([Shard(local, meta)], rows, cols)

    return (wrap,
            lambda t: t.local_shards()[0].tensor,
            lambda sd, d: dcp.save_state_dict(sd, dcp.FileSystemWriter(d, single_file_per_rank=True, sync_files=True)),
            lambda sd, d: dcp.load_state_dict(sd, dcp.FileSystemReader(d)))


def worker(rank, args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank, world_size=args.nproc)
    rows, cols, count = layout(int(args.size_mib * 1048576), args.nproc)
    per = rows // args.nproc
    wrap, to_local, save, load = dcp_api(rank, rows, cols, per)

    def state(fill):
        sd = {}
        for k in range(count):
            if fill:
                base = torch.arange(per * cols, dtype=torch.float64).reshape(per, cols)
                local = base + float(rank * per * cols + k)
            else:
                local = torch.empty(per, cols, dtype=torch.float64)
                local.fill_(0.0)  # touched before timing
            sd["large_%d" % k] = wrap(local)
        return sd

    src = state(True)
    dist.barrier()
    t0 = time.perf_counter()
    save(src, args.dir)
    dist.barrier()
    t_save = time.perf_counter() - t0

    dst = state(False)
    dropped = True
    if rank == 0:
        dropped = drop_caches(not args.no_drop_caches)
    dist.barrier()
    t0 = time.perf_counter()
    load(dst, args.dir)
    dist.barrier()
    t_load = time.perf_counter() - t0
    ok = all(torch.equal(to_local(dst[k]), to_local(src[k])) for k in src)
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
        try:
            from torch.distributed.checkpoint import save  # noqa: F401
            from torch.distributed.tensor import DTensor  # noqa: F401
        except ImportError:
            from torch.distributed._shard.checkpoint import save_state_dict  # noqa: F401
    except Exception as e:  # ImportError, or a torch whose DCP fails to import
        print("torch with DCP (2.x, or 1.13's torch.distributed._shard.checkpoint) is not usable from %s: %s: %s"
              % (sys.executable, type(e).__name__, e))
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

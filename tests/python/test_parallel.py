"""The cairn Python package under mpiexec with mpi4py: collective save and
load of shards on COMM_WORLD, resharded; run by CTest as python.parallel.npN."""
import os
import pathlib

import numpy as np
import pytest
from mpi4py import MPI

import cairn

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
G = (23, 17)


def field(i, j):
    return i * 1000.0 + j + 0.5


def blocks(n, parts):
    """Uneven split of n into parts (the first get one more), as (start, count)."""
    q, r = divmod(n, parts)
    out, s = [], 0
    for p in range(parts):
        c = q + (1 if p < r else 0)
        out.append((s, c))
        s += c
    return out


@pytest.fixture
def tmp():
    d = pathlib.Path(os.environ.get("CAIRN_TEST_DIR", "/tmp/cairn-py-parallel")) / f"np{size}"
    if rank == 0:
        d.mkdir(parents=True, exist_ok=True)
    comm.Barrier()
    return d


@pytest.mark.parametrize("layout", ["per_rank", "container"])
def test_rows_saved_columns_loaded(tmp, layout):
    r0, nr = blocks(G[0], size)[rank]
    I, J = np.meshgrid(np.arange(r0, r0 + nr), np.arange(G[1]), indexing="ij")
    mine = field(I, J)
    path = tmp / (f"rows.h5" if layout == "container" else "rows")
    everyone = np.arange(5, dtype=np.int64) * 3  # replicated: stored once
    cairn.save({"u": cairn.Shard(mine, G, (r0, 0)), "rep": everyone, "step": 7, "name": "rows"},
               path, comm=comm, layout=layout, overwrite=True)
    # Loaded by columns, on the reverse rank order.
    c0, nc = blocks(G[1], size)[size - 1 - rank]
    dest = np.zeros((G[0], nc))
    values, r = cairn.load({"u": cairn.Shard(dest, G, (0, c0)), "step": None, "name": None}, path, comm=comm,
                           partial=True)
    assert r["missing"] == []
    I, J = np.meshgrid(np.arange(G[0]), np.arange(c0, c0 + nc), indexing="ij")
    np.testing.assert_array_equal(dest, field(I, J))
    assert values == {"step": 7, "name": "rows"}
    assert r["bytes_all_ranks"] >= comm.allreduce(r["bytes"]) - 1  # the same sum on every rank
    # Rank 0 alone reads it back through cairn.open, the others wait.
    if rank == 0:
        ck = cairn.open(path)
        assert ck.world_size == size
        I, J = np.meshgrid(np.arange(G[0]), np.arange(G[1]), indexing="ij")
        np.testing.assert_array_equal(ck["u"][...], field(I, J))
        assert len(ck.decomposition("rep")) == 1
        np.testing.assert_array_equal(ck["rep"][...], everyone)
    comm.Barrier()


def test_one_rank_wrong_fails_everywhere(tmp):
    # Rank 0 declares another global shape: every rank raises, none hangs.
    g = (G[0] + (1 if rank == 0 else 0), G[1])
    r0, nr = blocks(G[0], size)[rank]
    with pytest.raises(cairn.Error) as e:
        cairn.save({"u": cairn.Shard(np.zeros((nr, G[1])), g, (r0, 0))}, tmp / "bad", comm=comm, overwrite=True)
    assert "'u'" in str(e.value)
    comm.Barrier()


@pytest.mark.parametrize("layout", ["per_rank", "container"])
def test_row_group_counts_vary_per_rank(tmp, layout):
    # Rank 1 has no rows; the others differ.
    def saved(r):
        return 0 if r == 1 else 2 + 3 * r
    n, first = saved(rank), sum(saved(r) for r in range(rank))
    total = sum(saved(r) for r in range(size))
    g = np.arange(first, first + n)
    path = tmp / ("prow.h5" if layout == "container" else "prow")
    rows = cairn.Rows({"id": g.astype(np.int64), "x": np.stack([g * 0.5, g * 0.25, -g * 1.0], axis=1)})
    cairn.save({"particles": rows, "step": 9}, path, comm=comm, layout=layout, overwrite=True)
    assert (rows.local_rows, rows.offset, rows.global_rows) == (n, first, total)
    # Loaded with the even split, with given counts (all on the last rank)
    # and with a callback (all on rank 0).
    for how in ({}, {"rows": total if rank == size - 1 else 0}, {"split": lambda N, r, p: N if r == 0 else 0}):
        back = cairn.Rows(["id", "x"], **how)
        values, _ = cairn.load({"particles": back, "step": None}, path, comm=comm)
        m = back.local_rows
        if not how:
            assert m == cairn.Rows.even_share(total, rank, size)
        got = values["particles"]
        want = np.arange(back.offset, back.offset + m)
        np.testing.assert_array_equal(got["id"], want)
        np.testing.assert_array_equal(got["x"], np.stack([want * 0.5, want * 0.25, -want * 1.0], axis=1).reshape(m, 3))
        assert comm.allreduce(m) == total and values["step"] == 9
    # Arrays disagreeing in rows on the last rank: every rank raises.
    bad = cairn.Rows({"a": np.zeros(2), "b": np.zeros(1 if rank == size - 1 else 2)})
    with pytest.raises(cairn.WrongAPIUsage, match="'p.a' has 2, 'p.b' has 1"):
        cairn.save({"p": bad}, tmp / "prow_bad", comm=comm, overwrite=True)


@pytest.mark.parametrize("layout", ["per_rank", "container"])
def test_cooperative_load(tmp, layout):
    # Every rank loads the whole array: plainly each reads all of it, with
    # cooperative reads it is read once in all and the rest received.
    n = 5000
    path = tmp / ("coop.h5" if layout == "container" else "coop")
    mine = np.arange(rank * n, (rank + 1) * n, dtype=np.float64) * 0.5 - 3.0
    cairn.save({"a": cairn.Shard(mine, (n * size,), (rank * n,))}, path, comm=comm, layout=layout, overwrite=True)
    sums = {}
    for coop in (False, True):
        whole = np.zeros(n * size)
        _, r = cairn.load({"a": whole}, path, comm=comm, cooperative=coop)
        np.testing.assert_array_equal(whole, np.arange(n * size, dtype=np.float64) * 0.5 - 3.0)
        sums[coop] = (comm.allreduce(r["bytes"]), comm.allreduce(r["bytes_received"]))
        assert r["bytes_all_ranks"] == sums[coop][0]
    assert sums[False][1] == 0
    assert sums[False][0] >= 8 * n * size * size  # each rank read the whole array
    assert sums[True][0] <= 1.05 * 8 * n * size  # each block once in all
    assert sums[True][1] >= 8 * n * size * (size - 1)
    assert sums[True][0] < sums[False][0]


@pytest.mark.parametrize("files,expected", [("per-rank", None), ("per-node", 1), (2, 2), (1, 1)])
def test_grouped_data_files(tmp, files, expected):
    # One node here: "per-node" is one group of every rank, M groups are
    # min(M, ranks) files; loaded back on the reverse rank order.
    expected = size if expected is None else min(expected, size)
    path = tmp / f"grouped-{files}"
    r0, nr = blocks(G[0], size)[rank]
    I, J = np.meshgrid(np.arange(r0, r0 + nr), np.arange(G[1]), indexing="ij")
    cairn.save({"u": cairn.Shard(field(I, J), G, (r0, 0)), "step": 3}, path, comm=comm, overwrite=True,
               data_files=files)
    comm.Barrier()
    assert len(list(path.glob("*.distcp"))) == expected
    b0, nb = blocks(G[0], size)[size - 1 - rank]
    dest = np.zeros((nb, G[1]))
    values, _ = cairn.load({"u": cairn.Shard(dest, G, (b0, 0)), "step": None}, path, comm=comm)
    I, J = np.meshgrid(np.arange(b0, b0 + nb), np.arange(G[1]), indexing="ij")
    np.testing.assert_array_equal(dest, field(I, J))
    assert values == {"step": 3}


def test_data_files_refused(tmp):
    for bad in ("per-host", 0, -1, True, 1.5):
        with pytest.raises(cairn.WrongAPIUsage, match="data_files must be"):
            cairn.save({"x": np.zeros(3)}, tmp / "never", comm=comm, data_files=bad)

"""The cairn Python package in one process: save, open, slices, managers, errors.

Run by CTest as python.serial (PYTHONPATH=<build>/python, CAIRN_TEST_DIR a
directory of its own)."""
import os
import pathlib
import shutil

import numpy as np
import pytest

import cairn

rng = np.random.default_rng(20261127)


@pytest.fixture
def tmp(tmp_path):
    base = os.environ.get("CAIRN_TEST_DIR")
    if base:
        d = pathlib.Path(base) / tmp_path.name
        shutil.rmtree(d, ignore_errors=True)  # what an earlier run left
        d.mkdir(parents=True)
        return d
    return tmp_path


def sample_state():
    return {
        "temperature": rng.standard_normal((37, 23)),
        "ids": np.arange(1000, dtype=np.int32) * 7 - 3,
        "flags": rng.integers(0, 2, size=(5, 4, 3)).astype(bool),
        "grid.spacing": np.array([0.5, 0.25, 0.125], dtype=np.float32),
        "step": 42,
        "time": 1.25,
        "converged": True,
        "dt": np.float32(0.001),
        "note": "initial conditions, Ω",
        "blob": bytes(range(256)) * 3,
    }


@pytest.mark.parametrize("layout", ["per_rank", "container"])
def test_round_trip(tmp, layout):
    state = sample_state()
    path = tmp / ("ck.h5" if layout == "container" else "ck")
    r = cairn.save(state, path, layout=layout)
    assert r["bytes"] >= state["temperature"].nbytes + state["ids"].nbytes
    ck = cairn.open(path)
    assert ck.layout == layout and ck.world_size == 1
    assert set(ck.keys()) == set(state)
    assert ck.entries["temperature"].kind == "array" and ck.entries["temperature"].dtype == "f64"
    assert ck.entries["temperature"].shape == (37, 23)
    assert ck.entries["ids"].dtype == "i32" and ck.entries["flags"].dtype == "bool"
    for name in ("temperature", "ids", "flags", "grid.spacing"):
        a = ck[name]
        assert a.shape == state[name].shape and a.dtype == state[name].dtype
        np.testing.assert_array_equal(a[...], state[name])
        np.testing.assert_array_equal(np.asarray(a), state[name])
    assert ck["step"] == 42 and isinstance(ck["step"], int)
    assert ck["time"] == 1.25 and ck["converged"] is True
    assert ck["dt"] == pytest.approx(0.001) and ck.entries["dt"].dtype == "f32"
    assert ck["note"] == "initial conditions, Ω"
    assert ck["blob"] == state["blob"]
    assert cairn.verify(path)["problems"] == []


def test_slices_read_what_numpy_selects(tmp):
    a = rng.standard_normal((41, 29, 3))
    path = tmp / "slices.h5"
    cairn.save({"a": a}, path)
    ck = cairn.open(path)
    keys = [
        (slice(10, 20), slice(None, None, 2)), (3,), (-1, slice(5, 6)), (Ellipsis, 1),
        (slice(None, None, -1),), (slice(30, 2, -7), slice(None), slice(2, 0, -1)),
        (slice(40, 41), 0, -3), (slice(5, 5),), (slice(100, 200),), (Ellipsis,),
    ]
    for _ in range(40):  # and random ones
        key = []
        for n in a.shape:
            if rng.random() < 0.25:
                key.append(int(rng.integers(-n, n)))
            else:
                lo, hi = sorted(rng.integers(-n - 2, n + 2, size=2))
                step = int(rng.choice([1, 1, 2, 3, -1, -2]))
                key.append(slice(int(lo), int(hi), step) if step > 0 else slice(int(hi), int(lo), step))
        keys.append(tuple(key))
    for key in keys:
        got = ck["a"][key]
        want = a[key]
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(got, want, err_msg=str(key))
    with pytest.raises(IndexError):
        ck["a"][41]
    with pytest.raises(IndexError):
        ck["a"][0, 0, 0, 0]


def test_a_slice_reads_only_its_chunks(tmp):
    # Saved by 4 "ranks" worth of boxes through one process is not possible;
    # instead a container whose array has many chunks: the low-level load of
    # a small box reports the bytes read, far fewer than the whole.
    n = 1 << 20
    a = np.arange(n, dtype=np.float64)
    path = tmp / "big"
    cairn.save({"a": a}, path)
    dest = np.empty(1000, dtype=np.float64)
    _, r = cairn.load({"a": cairn.Shard(dest, (n,), (5000,))}, path, partial=True)
    np.testing.assert_array_equal(dest, a[5000:6000])
    ck = cairn.open(path)
    block = ck.checksum_block
    assert 0 < r["bytes"] <= dest.nbytes + 2 * block, (r, block)
    assert r["bytes"] < a.nbytes // 4


def test_manager_directory(tmp):
    root = tmp / "run"
    root.mkdir()
    cairn.save({"u": np.full(10, 1.0), "step": 10}, root / "step_00000010", layout="per_rank")
    cairn.save({"u": np.full(10, 2.0), "step": 20}, root / "step_00000020.h5")
    assert cairn.steps(root) == [10, 20]
    ck = cairn.open(root)
    assert ck.step == 20 and ck["step"] == 20 and ck.layout == "container"
    np.testing.assert_array_equal(ck["u"][:], np.full(10, 2.0))
    older = cairn.open(root, step=10)
    assert older["step"] == 10 and older.layout == "per_rank"
    with pytest.raises(cairn.NotFound, match="step 15"):
        cairn.open(root, step=15)
    # A per-rank checkpoint's metadata file stands for its checkpoint.
    assert cairn.open(root / "step_00000010" / "metadata.h5")["step"] == 10
    values, _ = cairn.load({"u": None, "step": None}, root)
    assert values["step"] == 20
    np.testing.assert_array_equal(values["u"], np.full(10, 2.0))


def test_may_be_missing(tmp):
    path = tmp / "mbm"
    cairn.save({"u": np.arange(4.0), "step": 3}, path)
    u = np.zeros(4)
    values, r = cairn.load({"u": u, "step": None, "extra": None}, path, may_be_missing=["extra"])
    assert values["step"] == 3 and r["missing"] == ["extra"]
    with pytest.raises(cairn.NotFound, match="did you mean 'step'"):
        cairn.load({"u": u, "stpe": None}, path, partial=True, may_be_missing=["extra"])


def test_decomposition(tmp):
    a = rng.standard_normal((64, 8))
    path = tmp / "dec"
    cairn.save({"a": a}, path)
    chunks = cairn.open(path).decomposition("a")
    assert chunks and all(c.bytes > 0 and c.file for c in chunks)
    covered = sum(int(np.prod(c.shape)) for c in chunks)
    assert covered == a.size


def test_errors_name_what_is_wrong(tmp):
    with pytest.raises(cairn.NotFound) as e:
        cairn.open(tmp / "nothing-here")
    assert "nothing-here" in str(e.value)
    assert issubclass(cairn.NotFound, cairn.Error)
    with pytest.raises(cairn.WrongAPIUsage, match="'obj'"):
        cairn.save({"obj": object()}, tmp / "bad")
    with pytest.raises(cairn.WrongAPIUsage, match="'c'"):
        cairn.save({"c": np.zeros(3, dtype=np.complex128)}, tmp / "bad")
    path = tmp / "ck"
    cairn.save({"x": np.arange(100.0)}, path)
    with pytest.raises(cairn.Mismatch, match="'x'"):
        cairn.load({"x": np.zeros(101)}, path)
    with pytest.raises(cairn.WrongAPIUsage, match="read-only"):
        ro = np.zeros(100)
        ro.flags.writeable = False
        cairn.load({"x": ro}, path)
    with pytest.raises(cairn.WrongAPIUsage, match="overwrite"):
        cairn.save({"x": np.arange(100.0)}, path)  # exists, overwrite not asked for
    with pytest.raises(KeyError, match="'y'"):
        cairn.open(path)["y"]


def test_damage_is_found(tmp):
    path = tmp / "dmg"
    a = np.arange(4096.0)
    cairn.save({"a": a}, path)
    ck = cairn.open(path)
    c = ck.decomposition("a")[0]
    f = path / c.file
    data = bytearray(f.read_bytes())
    data[c.offset + 100] ^= 0x10
    f.write_bytes(bytes(data))
    with pytest.raises(cairn.IntegrityError, match="'a'"):
        ck["a"][...]
    assert cairn.verify(path)["problems"]
    # Without verification the damaged bytes come through: the flip is visible.
    raw = cairn.open(path, verify=False)["a"][...]
    assert (raw != a).sum() == 1


def test_rows_one_process(tmp):
    path = tmp / "rows"
    ids = np.arange(7, dtype=np.int64) * 5
    x = np.arange(21.0).reshape(7, 3)
    g = cairn.Rows({"id": ids, "x": x})
    cairn.save({"particles": g, "step": 3}, path)
    assert (g.local_rows, g.offset, g.global_rows) == (7, 0, 7)
    assert cairn.open(path)["particles.x"].shape == (7, 3)
    back = cairn.Rows(["id", "x"])
    values, _ = cairn.load({"particles": back, "step": None}, path)
    assert values["step"] == 3 and back.local_rows == 7
    np.testing.assert_array_equal(values["particles"]["id"], ids)
    np.testing.assert_array_equal(back.arrays["x"], x)
    with pytest.raises(cairn.WrongAPIUsage, match="'p.a' has 2, 'p.b' has 3"):
        cairn.save({"p": cairn.Rows({"a": np.zeros(2), "b": np.zeros(3)})}, tmp / "bad")
    with pytest.raises(cairn.Mismatch, match="ask for 5 rows in all, the checkpoint has 7"):
        cairn.load({"particles": cairn.Rows(["id", "x"], rows=5), "step": None}, path)

"""Cairn checkpoints from Python.

Reading (one process, any checkpoint of either layout, or a manager directory)::

    import cairn
    ck = cairn.open("run/ckpt")            # a manager directory: its latest step
    ck = cairn.open("run/ckpt", step=200)  # or a given step; or a checkpoint path
    ck.keys(); ck.entries["temperature"].shape
    t = ck["temperature"][10:20, ::2]       # numpy; reads only the chunks needed
    step = ck["step"]                       # scalars, strings and bytes as values

Writing from one process (initial conditions, converted data)::

    cairn.save({"temperature": array, "step": 3, "note": "ic"}, "ic.h5")

In parallel with mpi4py, on any communicator (collective, like the C++ API)::

    cairn.save({"u": cairn.Shard(local, global_shape, offsets)}, "ckpt", comm=comm)
    cairn.load({"u": cairn.Shard(dest, global_shape, offsets)}, "ckpt", comm=comm)

Every byte is read and written by libcairn itself (the same code as C++, C
and Fortran use), and every read is checked against the stored checksums.
Errors are cairn.Error subclasses named like the C++ ones (NotFound,
Mismatch, IntegrityError, ...), with the C++ message.
"""

import difflib
import os
import re
from dataclasses import dataclass, field

import numpy as np

from ._cairn import (  # noqa: F401  (re-exported)
    ConcurrentAccess,
    Error,
    FormatError,
    IntegrityError,
    Internal,
    Mismatch,
    NotFound,
    ReadError,
    WrongAPIUsage,
    WriteError,
)
from . import _cairn

__all__ = [
    "open", "save", "load", "verify", "steps", "Shard", "Rows", "Checkpoint", "ArrayEntry", "Entry", "version",
    "Error", "WrongAPIUsage", "Mismatch", "NotFound", "ReadError", "WriteError", "FormatError",
    "IntegrityError", "ConcurrentAccess", "Internal",
]

#: Cairn dtype names (docs/FORMAT.md) to numpy dtypes. bf16 has no numpy
#: type: it is read as its raw 16 bits (uint16).
_NUMPY = {
    "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "bool": np.bool_,
}


def version():
    """The version of the libcairn this package uses."""
    return _cairn.version()


def _numpy_dtype(name):
    try:
        return np.dtype(_NUMPY[name])
    except KeyError:
        raise FormatError(f"dtype '{name}' has no numpy type") from None


def _comm_handle(comm):
    """The Fortran handle of an mpi4py communicator (None: this process alone)."""
    if comm is None:
        return None
    try:
        return comm.py2f()
    except AttributeError:
        raise TypeError(f"comm must be an mpi4py communicator or None, not {type(comm).__name__}") from None


_STEP = re.compile(r"^step_(\d+)(\.h5)?$")


def _is_manager_root(path):
    if not os.path.isdir(path):
        return False
    if os.path.exists(os.path.join(path, "metadata.h5")) or os.path.exists(os.path.join(path, ".metadata.h5")):
        return False
    return os.path.exists(os.path.join(path, "LATEST")) or any(_STEP.match(n) for n in os.listdir(path))


def steps(root):
    """The committed, complete steps of a manager directory, ascending."""
    return list(_cairn.manager_steps(os.fspath(root)))


def _step_path(root, step):
    for name in (f"step_{step:08d}", f"step_{step:08d}.h5"):
        p = os.path.join(root, name)
        if os.path.exists(p):
            return p
    raise NotFound(f"manager directory {root}: no checkpoint of step {step}")


def _resolve(path, step):
    """A checkpoint path from a checkpoint path or a manager directory (+ step)."""
    path = os.fspath(path)
    if os.path.basename(path) == "metadata.h5" and os.path.isdir(os.path.dirname(path) or "."):
        path = os.path.dirname(path) or "."  # a per-rank checkpoint's metadata file: its checkpoint
    if _is_manager_root(path):
        committed = steps(path)
        if step is None:
            if not committed:
                raise NotFound(f"manager directory {path}: no committed checkpoint")
            step = committed[-1]
        elif step not in committed:
            raise NotFound(f"manager directory {path}: step {step} is not a committed checkpoint "
                           f"(committed: {committed})")
        return _step_path(path, step), step
    if step is not None:
        raise WrongAPIUsage(f"{path} is a checkpoint, not a manager directory: step={step} does not apply")
    return path, None


@dataclass(frozen=True)
class Chunk:
    """One stored chunk of an array: its box and where its bytes are."""
    offsets: tuple
    shape: tuple
    file: str
    offset: int
    bytes: int


@dataclass(frozen=True)
class Entry:
    """An entry of a checkpoint: kind ("array", "scalar", "string", "bytes"),
    Cairn dtype name, global shape, and its stored chunks (the decomposition
    it was saved with)."""
    name: str
    kind: str
    dtype: str
    shape: tuple
    chunks: tuple = field(repr=False)


class Shard:
    """A rank's box of a global array: `array` holds the elements of the box
    at `offsets` inside an array of `global_shape` (for save, its data; for
    load, the destination, filled in place)."""

    def __init__(self, array, global_shape, offsets):
        self.array = array
        self.global_shape = tuple(int(n) for n in global_shape)
        self.offsets = tuple(int(o) for o in offsets)
        if not isinstance(array, np.ndarray):
            raise TypeError("Shard: array must be a numpy array")
        if len(self.global_shape) != array.ndim or len(self.offsets) != array.ndim:
            raise WrongAPIUsage(f"Shard: global_shape {self.global_shape} and offsets {self.offsets} must have "
                                f"one value per dimension of the array ({array.ndim})")


class Rows:
    """Arrays whose first dimension (rows) varies per rank, sharing one
    distribution of rows (the ids, positions and velocities of one particle
    set); the entries are named "<key>.<array>" (cairn::RowGroup in C++).

    Save: ``{"particles": cairn.Rows({"id": ids, "x": x})}``, each array
    holding this rank's rows (0 is fine; the arrays must agree in rows).
    The offsets and the global row count come from the ranks' counts.

    Load: ``{"particles": cairn.Rows(["id", "x"])}`` gives each rank a share
    of the stored rows: the even split (rank r of P gets N // P rows, one
    more for r < N % P), or ``rows=`` this rank's count (the counts of all
    ranks must add up to N), or ``split=f`` with ``f(N, rank, size)``
    returning it. The arrays are allocated with the stored dtype and row
    shape and returned in ``values["particles"]`` (a dict, also
    ``rows.arrays``). After save or load: ``local_rows``, ``offset``,
    ``global_rows``."""

    def __init__(self, arrays, rows=None, split=None):
        if isinstance(arrays, dict):
            self.arrays = dict(arrays)
        else:
            self.arrays = {name: None for name in arrays}
        self.rows = rows
        self.split = split
        self.local_rows = self.offset = self.global_rows = None

    @staticmethod
    def even_share(global_rows, rank, size):
        """The even split's share of `rank` of `size`."""
        return global_rows // size + (1 if rank < global_rows % size else 0)


def _rank_size(comm):
    return (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())


def _agree_rows(comm, error, counts, call):
    """Collective (one allgather): raises the lowest failing rank's error on
    every rank; otherwise each group's (offset, total) from every rank's
    counts."""
    everyone = [(error, counts)] if comm is None else comm.allgather((error, counts))
    rank, _ = _rank_size(comm)
    for r, (e, _) in enumerate(everyone):
        if e is not None:
            kind, text = e
            raise kind(f"{call}: rank {r}: {text}")
    if len({len(c) for _, c in everyone}) != 1:
        raise Mismatch(f"{call}: ranks pass different numbers of cairn.Rows entries")
    out = []
    for g in range(len(counts)):
        column = [c[g] for _, c in everyone]
        out.append((sum(column[:rank]), sum(column)))
    return out


def _rows_for_save(state, comm):
    """`state` with each cairn.Rows entry replaced by the Shards of its arrays."""
    groups = [(k, v) for k, v in state.items() if isinstance(v, Rows)]
    if comm is not None and comm.allreduce(len(groups), op=_mpi_max()) == 0:
        return state
    if not groups and comm is None:
        return state
    error, counts = None, []
    for key, g in groups:
        try:
            if not g.arrays:
                raise WrongAPIUsage(f"row group '{key}' has no arrays")
            n = None
            for name, a in g.arrays.items():
                if not isinstance(a, np.ndarray) or a.ndim < 1:
                    raise WrongAPIUsage(f"row array '{key}.{name}': a numpy array of 1 or more dimensions, "
                                        f"its rows first")
                if n is None:
                    n, first = a.shape[0], name
                elif a.shape[0] != n:
                    raise WrongAPIUsage(f"row group '{key}': its arrays disagree in rows: '{key}.{first}' has {n}, "
                                        f"'{key}.{name}' has {a.shape[0]}")
            counts.append(n)
        except Error as e:
            error = (type(e), str(e))
            counts.append(0)
    placed = _agree_rows(comm, error, counts, "save")
    out = {}
    for key, v in state.items():
        if not isinstance(v, Rows):
            out[key] = v
            continue
        offset, total = placed[[k for k, _ in groups].index(key)]
        v.local_rows, v.offset, v.global_rows = next(iter(v.arrays.values())).shape[0], offset, total
        for name, a in v.arrays.items():
            out[f"{key}.{name}"] = Shard(a, (total,) + a.shape[1:], (offset,) + (0,) * (a.ndim - 1))
    return out


def _rows_for_load(state, path, comm):
    """`state` with each cairn.Rows entry replaced by Shards of arrays
    allocated for this rank's share; the groups by key."""
    groups = [(k, v) for k, v in state.items() if isinstance(v, Rows)]
    if comm is not None and comm.allreduce(len(groups), op=_mpi_max()) == 0:
        return state, {}
    if not groups and comm is None:
        return state, {}
    rank, size = _rank_size(comm)
    error, counts, stored = None, [], []
    md = None
    for key, g in groups:
        try:
            if md is None:
                md = _cairn.read_metadata(path)["entries"]
            total, first, shapes = None, None, {}
            for name in g.arrays:
                e = md.get(f"{key}.{name}")
                if e is None or e["kind"] != "array" or len(e["shape"]) < 1:
                    raise NotFound(f"row array '{key}.{name}' is not an array of the checkpoint {path}")
                shapes[name] = (tuple(e["shape"][1:]), _numpy_dtype(e["dtype"]))
                if total is None:
                    total, first = e["shape"][0], name
                elif e["shape"][0] != total:
                    raise Mismatch(f"row group '{key}': its stored arrays disagree in rows: '{key}.{first}' has "
                                   f"{total}, '{key}.{name}' has {e['shape'][0]}")
            if total is None:
                raise WrongAPIUsage(f"row group '{key}' has no arrays")
            if g.rows is not None:
                n = int(g.rows)
            elif g.split is not None:
                n = int(g.split(total, rank, size))
            else:
                n = Rows.even_share(total, rank, size)
            counts.append(n)
            stored.append((total, shapes))
        except Error as e:
            error = (type(e), str(e))
            counts.append(0)
            stored.append((0, {}))
    placed = _agree_rows(comm, error, counts, "load")
    for (key, _), (offset, asked), (total, _) in zip(groups, placed, stored):
        if asked != total:
            raise Mismatch(f"load: row group '{key}': the ranks ask for {asked} rows in all, "
                           f"the checkpoint has {total}")
    out, loaded = {}, {}
    for key, v in state.items():
        if not isinstance(v, Rows):
            out[key] = v
            continue
        i = [k for k, _ in groups].index(key)
        (offset, _), n, (total, shapes) = placed[i], counts[i], stored[i]
        v.local_rows, v.offset, v.global_rows = n, offset, total
        for name, (row_shape, dtype) in shapes.items():
            v.arrays[name] = np.empty((n,) + row_shape, dtype=dtype)
            out[f"{key}.{name}"] = Shard(v.arrays[name], (total,) + row_shape, (offset,) + (0,) * len(row_shape))
        loaded[key] = v.arrays
    return out, loaded


def _mpi_max():
    from mpi4py import MPI
    return MPI.MAX


class ArrayEntry:
    """An array of an open checkpoint, read on indexing: ``a[...]``,
    ``a[10:20, ::2]``, ``a[3]``, ``np.asarray(a)``. Only the stored chunks
    that overlap the selection are read, and verified."""

    def __init__(self, checkpoint, entry):
        self._ck = checkpoint
        self.entry = entry
        self.name = entry.name
        self.shape = entry.shape
        self.ndim = len(entry.shape)
        self.dtype = _numpy_dtype(entry.dtype)

    def __repr__(self):
        return f"<cairn array '{self.name}' {self.entry.dtype} {list(self.shape)} in {self._ck.path}>"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        a = self[...]
        return a.astype(dtype) if dtype is not None else a

    def read(self):
        """The whole array."""
        return self[...]

    def _normalize(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = next(i for i, k in enumerate(key) if k is Ellipsis)
            fill = self.ndim - (len(key) - 1)
            key = key[:i] + (slice(None),) * fill + key[i + 1:]
        if len(key) > self.ndim:
            raise IndexError(f"array '{self.name}': {len(key)} indices for {self.ndim} dimensions")
        key = key + (slice(None),) * (self.ndim - len(key))
        return key

    def __getitem__(self, key):
        key = self._normalize(key)
        offsets, shape, picks = [], [], []
        for d, (k, n) in enumerate(zip(key, self.shape)):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                idx = range(start, stop, step)
                if not idx:
                    offsets.append(0)
                    shape.append(0)
                    picks.append(slice(0, 0))
                    continue
                lo, hi = min(idx[0], idx[-1]), max(idx[0], idx[-1]) + 1
                offsets.append(lo)
                shape.append(hi - lo)  # the covered range, read ascending; numpy steps through it
                picks.append(slice(None, None, step) if step > 0 else slice(hi - 1 - lo, None, step))
                continue
            else:
                try:
                    i = int(k)
                except TypeError:
                    raise TypeError(f"array '{self.name}': index {k!r} is neither an integer nor a slice "
                                    "(fancy indexing: read a slice, then index the numpy array)") from None
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise IndexError(f"array '{self.name}': index {k} out of range for dimension {d} of size {n}")
                offsets.append(i)
                shape.append(1)
                picks.append(0)
        box = np.empty(shape, dtype=self.dtype)
        if box.size:
            self._ck._read_box(self.name, box, offsets)
        return box[tuple(picks)]


class Checkpoint:
    """A committed checkpoint, open for reading in this process (see open())."""

    def __init__(self, path, step=None, verify=True):
        self.path, self.step = _resolve(path, step)
        self.verify_checksums = verify
        md = _cairn.read_metadata(self.path)
        self.layout = md["layout"]
        self.world_size = md["world_size"]
        self.created = md["created"]
        self.format_version = md["format_version"]
        self.library_version = md["library_version"]
        self.checksum_block = md["checksum_block"]
        self._values = {}
        self.entries = {}
        for name, e in md["entries"].items():
            chunks = tuple(Chunk(tuple(c["offsets"]), tuple(c["shape"]), c["file"], c["offset"], c["bytes"])
                           for c in e["chunks"])
            self.entries[name] = Entry(name, e["kind"], e["dtype"], tuple(e["shape"]), chunks)
            if e["kind"] == "scalar":
                self._values[name] = np.frombuffer(e["value"], dtype=_numpy_dtype(e["dtype"]).newbyteorder("<"))[0].item()
            elif e["kind"] == "string":
                self._values[name] = e["value"]

    def __repr__(self):
        return f"<cairn checkpoint {self.path}: {self.layout}, {len(self.entries)} entries, saved on {self.world_size} ranks>"

    def keys(self):
        return self.entries.keys()

    def __iter__(self):
        return iter(self.entries)

    def __len__(self):
        return len(self.entries)

    def __contains__(self, name):
        return name in self.entries

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __getitem__(self, name):
        try:
            e = self.entries[name]
        except KeyError:
            raise KeyError(f"checkpoint {self.path} has no entry '{name}'") from None
        if e.kind == "array":
            return ArrayEntry(self, e)
        if e.kind in ("scalar", "string"):
            return self._values[name]
        values, _ = _cairn.load(self.path, [], [], [(name, "bytes")], None, self.verify_checksums, True, [], False)
        return values[name]

    def decomposition(self, name):
        """The stored chunks of an entry (box, file, byte offset, bytes): how it was saved."""
        return list(self.entries[name].chunks)

    def _read_box(self, name, dest, offsets):
        e = self.entries[name]
        _cairn.load(self.path, [(name, dest, list(e.shape), list(offsets))], [], [], None, self.verify_checksums, True,
                    [], False)


def open(path, step=None, verify=True):  # noqa: A001 (the package's open, like h5py.File)
    """Opens a checkpoint for reading in this process: a per-rank checkpoint
    directory (or its metadata.h5), a container file, or a manager directory
    (its latest committed step, or `step`). With verify (the default) every
    read is checked against the stored checksums."""
    return Checkpoint(path, step, verify)


def _split(state):
    arrays, scalars, strings, blobs = [], [], [], []
    for name, v in state.items():
        if not isinstance(name, str) or not name:
            raise WrongAPIUsage(f"state keys must be non-empty strings, not {name!r}")
        if isinstance(v, Shard):
            arrays.append((name, v.array, list(v.global_shape), list(v.offsets)))
        elif isinstance(v, np.ndarray) and v.ndim > 0:
            arrays.append((name, v, list(v.shape), [0] * v.ndim))
        elif isinstance(v, str):
            strings.append((name, v))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            blobs.append((name, bytes(v)))
        elif isinstance(v, (bool, int, float, np.generic)) or (isinstance(v, np.ndarray) and v.ndim == 0):
            a = np.array(v)
            if a.dtype.kind == "i" and a.dtype.itemsize != 8:
                a = a.astype(np.int64)
            scalars.append((name, a))
        else:
            raise WrongAPIUsage(f"entry '{name}': {type(v).__name__} cannot be saved "
                                "(numpy arrays, cairn.Shard, bool/int/float/numpy scalars, str, bytes)")
    return arrays, scalars, strings, blobs


def _data_files_arg(data_files):
    if isinstance(data_files, str) and data_files in ("per-rank", "per-node"):
        return data_files
    if isinstance(data_files, (int, np.integer)) and not isinstance(data_files, bool) and data_files >= 1:
        return str(int(data_files))
    raise WrongAPIUsage(f"data_files must be 'per-rank', 'per-node' or a number of files of at least 1, "
                        f"not {data_files!r}")


def save(state, path, comm=None, layout="automatic", overwrite=False, data_files="per-rank"):
    """Saves a dict of entries as checkpoint `path`: numpy arrays (whole
    arrays, held alike by every rank that passes them: stored once),
    cairn.Shard (a rank's box of a global array), Python or numpy scalars,
    str and bytes. Without comm, this process alone; with an mpi4py
    communicator, collective over it. layout: "automatic" (a container when
    path ends in .h5/.hdf5), "per_rank" or "container". data_files (per-rank
    layout): which ranks share a data file, "per-rank" (the default: one
    file per rank), "per-node" (one per node: the ranks that share memory)
    or a number M >= 1 (M files in all, contiguous groups of ranks); every
    rank passes the same value. Returns {"bytes": written by all ranks,
    "seconds": ...}."""
    files = _data_files_arg(data_files)
    state = _rows_for_save(state, comm)
    arrays, scalars, strings, blobs = _split(state)
    return _cairn.save(os.fspath(path), arrays, scalars, strings, blobs, _comm_handle(comm), layout, overwrite,
                       files)


def load(state, path, comm=None, step=None, verify=True, partial=False, may_be_missing=(), cooperative=False):
    """Loads checkpoint `path` (or a manager directory's step) into `state`:
    numpy arrays (filled whole) and cairn.Shard (the box of the array at its
    offsets) are filled in place, resharding from any decomposition; entries
    given as None (scalars, strings, bytes, or arrays: read whole) are
    returned. Every entry of the checkpoint must be asked for, unless
    partial (then entries of `state` that the checkpoint lacks are listed
    in the result's "missing"). may_be_missing names state keys (or
    prefixes ending in ".") the checkpoint may lack: without partial only
    these may be missing; with it, a non-empty list restricts which may be,
    so that a misspelt key fails. cooperative: each checksum block that
    several ranks need is read from storage by one of them and sent to the
    others over MPI (worth it across nodes; every rank passes the same
    value). Collective over comm (None: this process alone). Returns
    (values, {"bytes": read from storage by this rank, "bytes_all_ranks":
    ..., "bytes_received": got from other ranks' cooperative reads,
    "seconds": ..., "missing": [...]})."""
    path, _ = _resolve(path, step)
    state, row_values = _rows_for_load(state, path, comm)
    arrays, scalars, want = [], [], []
    wanted = [name for name, v in state.items() if v is None]
    kinds = {}
    absent = []  # entries given as None that the checkpoint lacks and may lack
    if wanted:
        md = _cairn.read_metadata(path)["entries"]

        def may_lack(name):
            if not may_be_missing:
                return partial
            return any(k == name or (k.endswith(".") and name.startswith(k)) for k in may_be_missing)

        for name in wanted:
            if name in md:
                kinds[name] = md[name]
            elif may_lack(name):
                absent.append(name)
            else:
                close = difflib.get_close_matches(name, list(md), n=1)
                raise NotFound(f"entry '{name}' is not in the checkpoint {path} (it holds {len(md)} entries)"
                               + (f"; did you mean '{close[0]}'?" if close else ""))
    values = {}
    for name, v in state.items():
        if isinstance(v, Shard):
            arrays.append((name, v.array, list(v.global_shape), list(v.offsets)))
        elif isinstance(v, np.ndarray):
            arrays.append((name, v, list(v.shape), [0] * v.ndim))
        elif v is None:
            if name in absent:
                continue
            e = kinds[name]
            if e["kind"] == "array":
                values[name] = np.empty(e["shape"], dtype=_numpy_dtype(e["dtype"]))
                arrays.append((name, values[name], list(e["shape"]), [0] * len(e["shape"])))
            elif e["kind"] == "scalar":
                values[name] = np.zeros((), dtype=_numpy_dtype(e["dtype"]))
                scalars.append((name, values[name]))
            else:
                want.append((name, e["kind"]))
        else:
            raise WrongAPIUsage(f"entry '{name}': load fills numpy arrays or cairn.Shard in place, "
                                f"and returns entries given as None; not {type(v).__name__}")
    loaded, result = _cairn.load(path, arrays, scalars, want, _comm_handle(comm), verify, partial,
                                 list(may_be_missing), bool(cooperative))
    for name, v in list(values.items()):
        if isinstance(v, np.ndarray) and v.ndim == 0:
            values[name] = v.item()
    values.update(loaded)
    values.update(row_values)
    result["missing"] = sorted(set(result["missing"]) | set(absent), key=list(state).index)
    return values, result


def verify(path, comm=None, step=None):
    """Reads every stored chunk and checks every checksum block; returns
    {"chunks", "bytes", "checksums", "problems"} (problems: one line per bad
    chunk; empty when the checkpoint is sound)."""
    path, _ = _resolve(path, step)
    return _cairn.verify(path, _comm_handle(comm))

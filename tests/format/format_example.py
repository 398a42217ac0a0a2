#!/usr/bin/env python3
"""Runs the h5py/numpy reader of docs/FORMAT.md section 4, as printed there,
on checkpoints of format versions 1, 2 and 3 written by cairn_format_samples,
and checks every value it reads. The documentation's code is the code under
test: nothing of Cairn reads the files here.

  format_example.py --doc docs/FORMAT.md --samples BIN --workdir DIR
                    --mpiexec MPIEXEC [MPIEXEC FLAGS...]

Exits 77 (skipped) when no Python with h5py and numpy is found: the
interpreter running this, then /usr/bin/python3 (Debian's python3-h5py).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def has_h5py(python):
    try:
        return subprocess.run([python, "-c", "import h5py, numpy"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


def example_code(doc):
    """The first python block of section 4."""
    text = open(doc, encoding="utf-8").read()
    start = text.index("## 4. Reading a checkpoint without Cairn")
    m = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    if not m:
        sys.exit(f"{doc}: no python block in section 4")
    return m.group(1)


def check(code, run_dir, version, shape, expected):
    """Runs the example in `run_dir`, which holds the checkpoint as ckpt/
    (the example reads "ckpt/..." from the current directory)."""
    import numpy as np
    here = os.getcwd()
    os.chdir(run_dir)
    try:
        scope = {}
        exec(compile(code, "FORMAT.md section 4", "exec"), scope)
    finally:
        os.chdir(here)
    got_version = int(scope["a"]["format_version"])
    out = scope["out"]
    want = expected(shape)
    problems = []
    if got_version != version:
        problems.append(f"format_version {got_version}, expected {version}")
    if out.dtype != np.float64 or out.shape != want.shape:
        problems.append(f"read {out.dtype} {out.shape}, expected float64 {want.shape}")
    elif not np.array_equal(out, want):
        bad = np.argwhere(out != want)
        problems.append(f"{len(bad)} wrong values, the first at {tuple(bad[0])}: "
                        f"{out[tuple(bad[0])]} instead of {want[tuple(bad[0])]}")
    return problems


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--doc", required=True)
    p.add_argument("--samples", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--mpiexec", required=True, nargs=argparse.REMAINDER)
    args = p.parse_args()

    try:
        import h5py  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        debian = "/usr/bin/python3"
        if os.path.realpath(debian) != os.path.realpath(sys.executable) and has_h5py(debian):
            os.execv(debian, [debian] + sys.argv)
        print("no Python with h5py and numpy (apt-get install python3-h5py python3-numpy): skipped")
        return SKIP
    import numpy as np

    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    subprocess.run(args.mpiexec + ["-n", "2", args.samples, args.workdir], check=True)
    code = example_code(args.doc)

    def rows_cols(f):
        return lambda shape: np.fromfunction(f, shape, dtype=np.int64).astype(np.float64)

    # name, format version, global shape of "u", its values (make_samples.cpp)
    cases = [
        ("v1", 1, (60, 7), rows_cols(lambda i, j: 0.25 * (7 * i + j) + 1)),
        ("v2", 2, (20000, 4), rows_cols(lambda k, c: 10 * k + c)),
        ("v3", 3, (2048, 1024), rows_cols(lambda i, j: (1024 * i + j) % 1000)),
        ("v3_boxes", 3, (20000, 4), rows_cols(lambda k, c: 10 * k + c)),
    ]
    failed = 0
    for name, version, shape, expected in cases:
        # The example names the directory "ckpt": give each sample its own.
        run_dir = os.path.join(args.workdir, name + "_run")
        os.makedirs(run_dir)
        os.rename(os.path.join(args.workdir, name), os.path.join(run_dir, "ckpt"))
        problems = check(code, run_dir, version, shape, expected)
        print(f"{name}: {'ok' if not problems else '; '.join(problems)}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

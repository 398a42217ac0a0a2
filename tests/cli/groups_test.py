#!/usr/bin/env python3
"""The cairn tool on grouped data files (PerRankTuning::files).

    groups_test.py --cairn BIN --heat2d BIN --workdir DIR --mpiexec MPIEXEC [FLAGS...]

heat2d saves the same field on 4 ranks into one file (--files 1) and on 3
ranks one file per rank; `cairn ls -l`, `diff` and `verify` read the grouped
checkpoint as any other, and `verify` of a truncated or removed group file
names the file and the ranks that wrote it. Exit status 0 when all holds.
"""
import argparse
import os
import shutil
import subprocess
import sys

FAILED = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILED.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     "))


def run(cmd):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cairn", required=True)
    p.add_argument("--heat2d", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--mpiexec", nargs=argparse.REMAINDER, required=True)
    a = p.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    grouped, per_rank = os.path.join(a.workdir, "grouped"), os.path.join(a.workdir, "per_rank")
    mpiexec, flags = a.mpiexec[0], a.mpiexec[1:]
    grid = ["--nx", "600", "--ny", "300", "--steps", "5"]
    r = run([mpiexec, "-n", "4", *flags, a.heat2d, *grid, "--checkpoint", grouped, "--files", "1"])
    check(r.returncode == 0, "heat2d --files 1 on 4 ranks", r.stdout + r.stderr)
    r = run([mpiexec, "-n", "3", *flags, a.heat2d, *grid, "--checkpoint", per_rank])
    check(r.returncode == 0, "heat2d on 3 ranks, one file per rank", r.stdout + r.stderr)
    files = sorted(f for f in os.listdir(grouped) if f.endswith(".distcp"))
    check(files == ["__0-3_0.distcp"], "one data file written by ranks 0 to 3", str(files))

    r = run([a.cairn, "ls", "-l", grouped])
    check(r.returncode == 0 and "per-rank layout" in r.stdout and "4 chunks" in r.stdout, "ls -l", r.stdout + r.stderr)
    r = run([a.cairn, "diff", grouped, per_rank])
    check(r.returncode == 0 and "are equal" in r.stdout, "diff against the per-rank save", r.stdout + r.stderr)
    r = run([a.cairn, "verify", grouped])
    check(r.returncode == 0 and "OK" in r.stdout, "verify", r.stdout + r.stderr)
    r = run([mpiexec, "-n", "2", *flags, a.cairn, "verify", grouped])
    check(r.returncode == 0 and "OK" in r.stdout, "verify on 2 ranks", r.stdout + r.stderr)

    data = os.path.join(grouped, "__0-3_0.distcp")
    os.truncate(data, 1000)
    r = run([a.cairn, "verify", grouped])
    out = r.stdout + r.stderr
    check(r.returncode == 1 and "short read" in out and data in out and "written by ranks 0 to 3" in out,
          "verify of a truncated group file names it and its ranks", out)
    os.remove(data)
    r = run([a.cairn, "verify", grouped])
    out = r.stdout + r.stderr
    check(r.returncode == 1 and "missing data file " + data + ", written by ranks 0 to 3" in out,
          "verify of a removed group file names it and its ranks", out)
    if FAILED:
        print("%d check(s) failed" % len(FAILED))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

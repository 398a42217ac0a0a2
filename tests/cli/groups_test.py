#!/usr/bin/env python3
"""The cairn tool on grouped data files (PerRankTuning::files).

    groups_test.py --cairn BIN --heat2d BIN --workdir DIR --mpiexec MPIEXEC [FLAGS...]

heat2d saves the same field on 4 ranks into one file (--files 1) and on 3
ranks one file per rank; `cairn ls -l`, `diff` and `verify` read the grouped
checkpoint as any other, `convert --cooperative` on 3 ranks reads less of it
than a plain convert, and `verify` of a truncated or removed group file
names the file and the ranks that wrote it. Exit status 0 when all holds.
"""
import argparse
import json
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


def run(cmd, base_env=None):
    env = dict(base_env or os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
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

    # convert on 3 ranks: row blocks that cut the 4 ranks' chunks; with
    # --cooperative each block of the grouped file is read once in all.
    read = {}
    for coop in (False, True):
        out_dir = os.path.join(a.workdir, "converted-coop" if coop else "converted")
        prof = out_dir + ".profile"
        env = dict(os.environ, CAIRN_PROFILE=prof)
        r = run([mpiexec, "-n", "3", *flags, a.cairn, "convert", grouped, out_dir, "--quiet"]
                + (["--cooperative"] if coop else []), env)
        check(r.returncode == 0, "convert on 3 ranks, cooperative %s" % coop, r.stdout + r.stderr)
        loads = [json.loads(line) for line in open(prof) if '"load"' in line]
        loads = [rec for rec in loads if rec.get("operation") == "load"]
        check(len(loads) == 1, "one load profiled", str(loads))
        read[coop] = loads[0]["bytes"] if loads else -1
        r = run([a.cairn, "diff", grouped, out_dir])
        check(r.returncode == 0 and "are equal" in r.stdout, "converted copy equal, cooperative %s" % coop,
              r.stdout + r.stderr)
    data_bytes = os.path.getsize(os.path.join(grouped, "__0-3_0.distcp"))
    check(0 < read[True] < read[False] and read[True] <= data_bytes,
          "cooperative convert reads less: %d bytes, plain %d, file %d" % (read[True], read[False], data_bytes))

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

#!/usr/bin/env python3
"""CAIRN_PROFILE and the CAIRN_LOG lines against what the operations return.

Runs cairn_profile_run (profile_run.cpp) on --np ranks with CAIRN_PROFILE
set and checks the profile file: one record per save, load and verify of
both layouts and an async_save, with the rank count, the phases of each operation, every
rank's bytes summing to the bytes the call returned, min <= mean <= max,
imbalance = max / mean; then that `cairn profile` summarises it (text and
--json). A save that fails on one rank ends on every rank (no hang) and
adds no record. On 1 rank, a load of a few elements of a large array:
its per-rank CAIRN_LOG line, its total line and LoadResult::bytes_read
all count the bytes read, not the bytes planned.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--run", required=True, help="cairn_profile_run")
p.add_argument("--cairn", required=True, help="the cairn tool")
p.add_argument("--workdir", required=True)
p.add_argument("--np", type=int, required=True)
p.add_argument("--mpiexec", nargs=argparse.REMAINDER, default=[])
a = p.parse_args()

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
for var in ("CAIRN_LOG", "CAIRN_PROFILE"):
    ENV.pop(var, None)
failures = []


def check(ok, what, detail=""):
    if not ok:
        failures.append(what)
        print("FAIL:", what, detail[-3000:] if detail else "", file=sys.stderr)


def mpi(np_, *cmd):
    return [a.mpiexec[0], "-n", str(np_)] + a.mpiexec[1:] + list(cmd)


def run(cmd, env, timeout=240):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        check(False, "%s did not end within %d s" % (" ".join(cmd), timeout))
        sys.exit(1)
    if r.returncode != 0:
        check(False, "%s exits %d" % (" ".join(cmd), r.returncode), r.stdout + r.stderr)
    return r


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def close(x, y):
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


PHASES = {"save": ["plan", "exchange", "write", "commit"], "load": ["plan", "read"], "verify": ["plan", "verify"]}
DATA = {"save": "write", "load": "read", "verify": "verify"}

shutil.rmtree(a.workdir, ignore_errors=True)
os.makedirs(a.workdir)
np_ = a.np

# ---- save, load, verify of both layouts, profiled --------------------------------
prof = os.path.join(a.workdir, "profile.jsonl")
r = run(mpi(np_, a.run, a.workdir, "run"), dict(ENV, CAIRN_PROFILE=prof))
expected = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
check(len(expected) == 7, "cairn_profile_run prints 7 operations", r.stdout)
got = records(prof)
check(len(got) == len(expected), "one profile record per operation: %d, expected %d" % (len(got), len(expected)))
for e, g in zip(expected, got):
    what = "%s %s" % (e["operation"], e["path"])
    check(g.get("cairn_profile") == 1, what + ": version 1", str(g))
    check(g["operation"] == e["operation"] and g["path"] == e["path"], what + ": operation and path", str(g))
    check(g["layout"] == ("container" if e["path"].endswith(".h5") else "per_rank"), what + ": layout", g["layout"])
    check(g["ranks"] == np_, what + ": %d ranks" % np_, str(g["ranks"]))
    check(g["bytes"] == e["bytes"], what + ": bytes %d, the call's %d" % (g["bytes"], e["bytes"]))
    check(close(g["bandwidth"], g["bytes"] / g["seconds"]), what + ": bandwidth = bytes / seconds", str(g))
    check([ph["phase"] for ph in g["phases"]] == PHASES[e["operation"]], what + ": phases",
          str([ph["phase"] for ph in g["phases"]]))
    for ph in g["phases"] + [{"phase": "total", "seconds": g["total"]}]:
        where = what + ", phase " + ph["phase"]
        for key in ("seconds", "bytes"):
            if key not in ph:
                continue
            s = ph[key]
            v = s["ranks"]
            check(len(v) == np_, where + ": a %s value per rank" % key, str(v))
            check(s["min"] == min(v) and s["max"] == max(v) and close(s["mean"], sum(v) / len(v)),
                  where + ": min / max / mean of the ranks' " + key, str(s))
            check(s["min"] <= s["mean"] <= s["max"], where + ": min <= mean <= max", str(s))
            mean = sum(v) / len(v)
            check(close(s["imbalance"], max(v) / mean if mean > 0 else 1.0), where + ": imbalance = max / mean",
                  str(s))
            rank_key = "slowest_rank" if key == "seconds" else "max_rank"
            check(v[s[rank_key]] == max(v) and s[rank_key] == v.index(max(v)),
                  where + ": %s is the first rank with the max" % rank_key, str(s))
        if "bytes" in ph:
            b = ph["bytes"]
            check(b["sum"] == sum(b["ranks"]), where + ": bytes sum", str(b))
            if ph["phase"] == DATA[e["operation"]]:
                check(b["sum"] == e["bytes"], where + ": the ranks' bytes sum to the call's %d" % e["bytes"], str(b))
            else:
                check(b["sum"] == 0, where + ": no data bytes", str(b))
        if ph["phase"] != "total":
            check(ph["wall"] >= ph["seconds"]["max"] - 1e-9, where + ": wall >= every rank's time", str(ph))
    # The ranks hold 1000 * (r + 1) doubles each: a save writes different bytes per rank.
    if e["operation"] == "save" and np_ > 1:
        w = g["phases"][2]["bytes"]
        check(w["max_rank"] == np_ - 1 and w["imbalance"] > 1.0, what + ": the last rank writes the most", str(w))

# The tool's summary.
r = run([a.cairn, "profile", "--json", prof], ENV)
try:
    summary = json.loads(r.stdout)
except ValueError:
    summary = []
    check(False, "cairn profile --json prints JSON", r.stdout)
check(len(summary) == len(got), "cairn profile --json: one summary per record", r.stdout)
for s, g in zip(summary, got):
    what = "cairn profile --json, %s %s" % (g["operation"], g["path"])
    check(s["operation"] == g["operation"] and s["ranks"] == np_ and s["bytes"] == g["bytes"], what, str(s))
    check([ph["phase"] for ph in s["phases"]] == [ph["phase"] for ph in g["phases"]], what + ": phases", str(s))
    for sp, gp in zip(s["phases"], g["phases"]):
        check(sp["max"] == gp["seconds"]["max"] and sp["min"] == gp["seconds"]["min"] and
              sp["slowest_rank"] == gp["seconds"]["slowest_rank"] and
              close(sp["imbalance"], gp["seconds"]["imbalance"]), what + ": phase " + sp["phase"], str(sp))
        if gp["bytes"]["sum"] > 0:
            check(sp["bytes"] == gp["bytes"]["sum"], what + ": bytes of " + sp["phase"], str(sp))
r = run([a.cairn, "profile", prof], ENV)
heads = re.findall(r"^(save|load|verify) \"([^\"]+)\" \((per_rank|container), (\d+) ranks", r.stdout, re.M)
check([(h[0], h[1]) for h in heads] == [(g["operation"], g["path"]) for g in got] and
      all(int(h[3]) == np_ for h in heads), "cairn profile: a heading per record", r.stdout)
check(len(re.findall(r"^  write\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+\d+\s+\S+ \S*B\s+\S+ \S*B/s$", r.stdout,
                     re.M)) == 3, "cairn profile: the write phases with bytes and bandwidth", r.stdout)
bad = os.path.join(a.workdir, "bad.jsonl")
with open(bad, "w") as f:
    f.write(open(prof).readline() + "{\"operation\": \"save\"}\n")
r = subprocess.run([a.cairn, "profile", bad], capture_output=True, text=True, env=ENV, timeout=120)
check(r.returncode == 2 and "bad.jsonl:2" in r.stderr and "cairn_profile" in r.stderr,
      "cairn profile: a bad record is an error naming the file and line", r.stderr)

# ---- a profiled save that fails on one rank ----------------------------------------
fprof = os.path.join(a.workdir, "failing.jsonl")
r = run(mpi(np_, a.run, a.workdir, "fail"), dict(ENV, CAIRN_PROFILE=fprof), timeout=120)
got = records(fprof) if os.path.exists(fprof) else []
check([g["operation"] for g in got] == ["save"] and got[0]["bytes"] == 8000 * np_,
      "a failed save adds no record, the next save does", str(got))

# A profile file that cannot be written: a warning, the save succeeds.
r = run(mpi(np_, a.run, a.workdir, "fail"), dict(ENV, CAIRN_PROFILE=os.path.join(a.workdir, "no", "such.jsonl")),
        timeout=120)
check(re.search(r"^cairn: profile \S*no/such\.jsonl: no record of this save of '\S*failing': cannot open it", r.stderr,
                re.M), "an unwritable profile: a warning naming the file and the save", r.stderr)

# ---- only the coordinator's setting counts (set_profile_path) ----------------------
r = run(mpi(np_, a.run, a.workdir, "mixed"), ENV, timeout=120)
got = records(os.path.join(a.workdir, "mixed0.jsonl"))
check([(g["operation"], g["ranks"]) for g in got] == [("save", np_)] and
      got[0]["phases"][2]["bytes"]["ranks"] == [800] * np_,
      "rank 0 profiling alone: a record with every rank's phases", str(got))
check(not os.path.exists(os.path.join(a.workdir, "mixed1.jsonl")), "ranks but 0 profiling: no record")

# ---- CAIRN_LOG on 1 rank: per-rank line = total = LoadResult::bytes_read --------------
if np_ == 1:
    r = run([a.run, a.workdir, "partial"], dict(ENV, CAIRN_LOG="debug"))
    res = json.loads(r.stdout.splitlines()[-1])
    check(res["bytes_read"] > res["planned"], "the partial load reads more than it needs (a whole checksum block)",
          str(res))
    rank = re.search(r"^cairn: \[rank 0\] load '[^']*partial\.h5': read [0-9.]+ s, (.+?), .*\(this rank\)$",
                     r.stderr, re.M)
    total = re.search(r"^cairn: load '[^']*partial\.h5': read [0-9.]+ s, (.+?), [^,]*/s$", r.stderr, re.M)
    check(rank and total, "CAIRN_LOG=debug: the load's per-rank and total read lines", r.stderr)
    if rank and total:
        def binary(n):
            units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
            u, b = 0, float(n)
            while b >= 1024 and u < 5:
                b, u = b / 1024, u + 1
            return "%.0f %s" % (b, units[u]) if u == 0 else "%.2f %s" % (b, units[u])
        check(rank.group(1) == total.group(1) == binary(res["bytes_read"]),
              "the per-rank read line (%s), the total (%s) and LoadResult::bytes_read (%s) agree" %
              (rank.group(1), total.group(1), binary(res["bytes_read"])))

if failures:
    print("profile_test: %d failures" % len(failures))
    sys.exit(1)
print("profile_test: OK")

#!/usr/bin/env python3
"""`cairn steps ROOT` (docs/CLI.md): the committed steps of a checkpoint
manager directory, and the levels of each from ROOT/.cairn-levels (the levels
record, docs/FORMAT.md), with steps the record names in the file system that
are not committed in ROOT flagged (exit status 1). Stdlib only.

    steps_test.py --cairn BIN --make BIN --workdir DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--cairn", required=True)
p.add_argument("--make", required=True)
p.add_argument("--workdir", required=True)
a = p.parse_args()
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
env.pop("CAIRN_LOG", None)
failures = []


def check(cond, what, detail=""):
    if not cond:
        failures.append(what)
        print("FAIL: " + what + ("\n" + detail if detail else ""), file=sys.stderr)


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=120)


shutil.rmtree(a.workdir, ignore_errors=True)
root = os.path.join(a.workdir, "root")
os.makedirs(root)
for step, container in [(10, False), (20, True), (30, False)]:
    name = "step_%08d" % step + (".h5" if container else "")
    r = run(a.make, os.path.join(root, name), *(["--container"] if container else []))
    check(r.returncode == 0, "make_checkpoint %s" % name, r.stderr)
# An uncommitted step (no metadata.h5) is no step.
os.makedirs(os.path.join(root, "step_00000040"))

# Without a levels record: the committed steps alone.
r = run(a.cairn, "steps", root)
check(r.returncode == 0, "steps without a record exits 0", r.stdout + r.stderr)
lines = r.stdout.splitlines()
check(lines and "3 committed steps; no levels record" in lines[0], "steps: summary line", r.stdout)
rows = [l.split() for l in lines[2:]]
check([x[0] for x in rows] == ["10", "20", "30"], "steps: the committed steps in order", r.stdout)
check(rows and rows[0][1] == "per-rank" and rows[1][1] == "container", "steps: layouts", r.stdout)
r = run(a.cairn, "steps", root, "--json")
doc = json.loads(r.stdout)
check(doc["levels"] is None and [s["step"] for s in doc["steps"]] == [10, 20, 30], "steps --json without record",
      r.stdout)
size10 = sum(os.path.getsize(os.path.join(root, "step_00000010", f))
             for f in os.listdir(os.path.join(root, "step_00000010")))
check(doc["steps"][0]["bytes"] == size10 and doc["steps"][1]["layout"] == "container",
      "steps --json: bytes on disk and layout", r.stdout)

# With a record: step 30 node-local and in the file system, 50 node-local only,
# 5 recorded in the file system but gone from the root.
record = {"format": "cairn-levels", "version": 1, "local_dir": "/dev/shm/run-%n", "redundancy": "xor:3",
          "nodes": 3, "ranks": 6,
          "steps": [{"step": 5, "node_local": False, "file_system": True},
                    {"step": 10, "node_local": False, "file_system": True},
                    {"step": 20, "node_local": False, "file_system": True},
                    {"step": 30, "node_local": True, "file_system": True},
                    {"step": 50, "node_local": True, "file_system": False}]}
with open(os.path.join(root, ".cairn-levels"), "w") as f:
    json.dump(record, f)
r = run(a.cairn, "steps", root)
check(r.returncode == 1, "steps with a missing step exits 1", r.stdout + r.stderr)
check("node-local level /dev/shm/run-%n, redundancy xor:3, 3 nodes, 6 ranks" in r.stdout, "steps: the levels",
      r.stdout)
by_step = {l.split()[0]: l for l in r.stdout.splitlines()[2:]}
check("MISSING" in by_step.get("5", ""), "steps: step 5 flagged missing", r.stdout)
check(by_step.get("30", "").endswith("node-local, file system"), "steps: step 30 on both levels", r.stdout)
check(by_step.get("50", "").split()[1:3] == ["-", "-"] and by_step["50"].endswith("node-local"),
      "steps: step 50 node-local only", r.stdout)
check("MISSING" not in by_step.get("10", "x") and "MISSING" not in by_step.get("50", "x"),
      "steps: only step 5 flagged", r.stdout)
check("1 step of the levels record is not committed" in r.stderr, "steps: the flag on stderr", r.stderr)
r = run(a.cairn, "steps", root, "--json")
doc = json.loads(r.stdout)
check(r.returncode == 1 and doc["missing"] == [5], "steps --json: missing", r.stdout)
check(doc["levels"] == {"local_dir": "/dev/shm/run-%n", "redundancy": "xor:3", "nodes": 3, "ranks": 6},
      "steps --json: levels", r.stdout)
s = {x["step"]: x for x in doc["steps"]}
check(s[50]["node_local"] and not s[50]["committed"] and s[30]["committed"] and s[30]["node_local"],
      "steps --json: levels per step", r.stdout)

# The record without the missing step: exit 0.
record["steps"] = record["steps"][1:]
with open(os.path.join(root, ".cairn-levels"), "w") as f:
    json.dump(record, f)
r = run(a.cairn, "steps", root)
check(r.returncode == 0 and "MISSING" not in r.stdout, "steps with a consistent record exits 0", r.stdout + r.stderr)

# A step held on some nodes only: PARTIAL, naming the nodes (and hosts) that
# hold it and those that do not; not a flag (exit 0).
record["hosts"] = ["c1", "c2", "c3"]
record["steps"].append({"step": 60, "node_local": False, "file_system": False, "partial": [0, 2]})
with open(os.path.join(root, ".cairn-levels"), "w") as f:
    json.dump(record, f)
r = run(a.cairn, "steps", root)
check(r.returncode == 0, "steps with a partial step exits 0", r.stdout + r.stderr)
by_step = {l.split()[0]: l for l in r.stdout.splitlines()[2:]}
check(by_step.get("60", "").endswith("PARTIAL node-local: on 2 of 3 nodes, not on node 1 (c2)"),
      "steps: step 60 partial, node 1 named", r.stdout)
check(by_step.get("50", "").endswith("  node-local"), "steps: step 50 still node-local", r.stdout)
r = run(a.cairn, "steps", root, "--json")
doc = json.loads(r.stdout)
s = {x["step"]: x for x in doc["steps"]}
check(r.returncode == 0 and s[60]["partial"] == [0, 2] and not s[60]["node_local"] and "partial" not in s[50],
      "steps --json: partial", r.stdout)
check(doc["levels"].get("hosts") == ["c1", "c2", "c3"], "steps --json: hosts", r.stdout)

# A damaged record and a root that is no directory: errors naming the file.
with open(os.path.join(root, ".cairn-levels"), "w") as f:
    f.write('{"format": "cairn-levels", "version": 1, "steps": [')
r = run(a.cairn, "steps", root)
check(r.returncode == 2 and os.path.join(root, ".cairn-levels") in r.stderr and "damaged" in r.stderr,
      "steps: a damaged record is an error naming it", r.stderr)
r = run(a.cairn, "steps", os.path.join(root, "nothing"))
check(r.returncode == 2 and "nothing" in r.stderr, "steps: no such root", r.stderr)

if failures:
    sys.exit("%d failures" % len(failures))
print("ok: cairn steps")

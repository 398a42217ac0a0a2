#!/usr/bin/env python3
"""Tests of the cairn command-line tool (docs/CLI.md), stdlib only.

    cli_test.py --cairn BIN --make BIN --minimal BIN --heat2d BIN --workdir DIR
                --np N [--jobs J] [--mpiexec MPIEXEC [FLAG...]]

Writes checkpoints with examples/01_minimal, examples/heat2d and
make_checkpoint (every entry kind, known values), then runs every verb of the
tool on N ranks (N = 1: without mpiexec) and checks output and exit status.
Everything happens under DIR, which is emptied first. The checkpoints, then
the sections of checks (each on files of its own), run J at a time (default
4): a tool run is mostly the start of its MPI job, which overlaps well.
"""
import argparse
import concurrent.futures
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import time
import traceback

FAILURES = []


def check(cond, what, detail=""):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what + ("\n" + detail if detail else ""), file=sys.stderr)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--cairn", required=True)
    p.add_argument("--make", required=True)
    p.add_argument("--minimal", required=True)
    p.add_argument("--heat2d", required=True)
    p.add_argument("--hostile", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--mpiexec", nargs=argparse.REMAINDER, default=[])  # last: MPIEXEC and its flags
    return p.parse_args()


ARGS = parse_args()
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
ENV.pop("CAIRN_LOG", None)
JOBS = max(1, ARGS.jobs)


def mpi(np_, *cmd):
    if not ARGS.mpiexec:
        return list(cmd)
    return [ARGS.mpiexec[0], "-n", str(np_)] + ARGS.mpiexec[1:] + list(cmd)


def run(cmd, env=None, expect=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, timeout=240)
    if expect is not None and r.returncode != expect:
        check(False, "%s exits %d, expected %d" % (" ".join(cmd), r.returncode, expect),
              r.stdout[-2000:] + r.stderr[-2000:])
    return r


def cairn(*args, env=None, expect=0, np_=None):
    """The tool on ARGS.np ranks (serially when --np 1)."""
    n = ARGS.np if np_ is None else np_
    cmd = [ARGS.cairn] + list(args)
    if n > 1:
        cmd = mpi(n, *cmd)
    return run(cmd, env=env, expect=expect)


def cairn_soon(*args, expect=2, seconds=60):
    """The tool on ARGS.np ranks; a run that takes longer than `seconds` (a
    FIFO blocking an open) is killed and reported."""
    cmd = [ARGS.cairn] + list(args)
    if ARGS.np > 1:
        cmd = mpi(ARGS.np, *cmd)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=seconds)
    except subprocess.TimeoutExpired:
        check(False, "%s: still running after %d s" % (" ".join(cmd), seconds))
        return subprocess.CompletedProcess(cmd, -1, "", "")
    if r.returncode != expect:
        check(False, "%s exits %d, expected %d" % (" ".join(cmd), r.returncode, expect),
              r.stdout[-2000:] + r.stderr[-2000:])
    return r


def numbers(text):
    """The values printed by `cairn cat`, in order (the (i,j) prefixes dropped)."""
    out = []
    for line in text.splitlines():
        out += re.sub(r"^\([0-9,]*\)", "", line).split()
    return out

def json_of(r, what):
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        check(False, "%s: not JSON (%s)" % (what, e), r.stdout + r.stderr)
        return None



W = os.path.abspath(ARGS.workdir)
shutil.rmtree(W, ignore_errors=True)
os.makedirs(W)


def p(name):
    return os.path.join(W, name)


# ---- checkpoints -------------------------------------------------------------
def make_checkpoints():
    """The checkpoints the sections read, written concurrently."""
    jobs = [mpi(2, ARGS.make, p("rich")),
            mpi(2, ARGS.make, p("rich.h5"), "--container"),
            mpi(2, ARGS.make, p("rich_mod"), "--modify"),
            mpi(2, ARGS.make, p("one"), "--one"),
            mpi(2, ARGS.make, p("one_mod"), "--one", "--modify"),
            mpi(2, ARGS.minimal, p("minimal")),
            # 600 x 300 doubles (1.4 MiB): with --memory 1 the verbs take several passes.
            mpi(4, ARGS.heat2d, "--nx", "600", "--ny", "300", "--steps", "5", "--checkpoint", p("heat")),
            mpi(2, ARGS.heat2d, "--nx", "600", "--ny", "300", "--steps", "6", "--checkpoint", p("heat6")),
            # Checkpoint manager directories: heat2d saving every 2 (3) steps, keeping
            # the last 2: mgr/step_00000004, mgr/step_00000006 (mgr_c: .h5 of 3 and 6).
            mpi(2, ARGS.heat2d, "--nx", "600", "--ny", "300", "--steps", "6", "--checkpoint-every", "2",
                "--checkpoint-dir", p("mgr")),
            mpi(2, ARGS.heat2d, "--nx", "600", "--ny", "300", "--steps", "6", "--checkpoint-every", "3",
                "--checkpoint-dir", p("mgr_c"), "--container")]
    with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as pool:
        list(pool.map(lambda cmd: run(cmd, expect=0), jobs))



# ---- ls: every kind of entry, -D, -l, --json, CKPT/metadata.h5 -----------------
def section_ls():
    r = cairn("ls", p("rich"))
    out = r.stdout
    check(re.search(r"^  grid +array +f32 +\[7, 5, 3\] +2 chunks, 420 bytes$", out, re.M), "ls: grid line", out)
    check(re.search(r"^  count +scalar +u64 += 18446744073709551615$", out, re.M), "ls: u64 scalar value", out)
    check(re.search(r"^  dt +scalar +f32 += 0\.5$", out, re.M), "ls: f32 scalar value", out)
    check(re.search(r'^  label +string +\= "hello \\"cairn\\"\\n"$', out, re.M), "ls: string value, escaped", out)
    check(re.search(r"^  blob +bytes +20 bytes$", out, re.M), "ls: bytes length", out)
    check(re.search(r"per-rank layout.*2 ranks", out), "ls: header names layout and ranks", out)
    check(re.search(r"11 entries", out), "ls: entry count", out)

    for ck, layout in (("rich", "distcp"), ("rich.h5", "container")):
        r = cairn("ls", "--json", p(ck))
        try:
            doc = json.loads(r.stdout)
        except ValueError as e:
            check(False, "ls --json %s: not JSON (%s)" % (ck, e), r.stdout)
            continue
        check(doc["layout"] == layout, "ls --json %s: layout" % ck)
        check(doc["world_size"] == 2, "ls --json %s: world_size" % ck)
        e = {x["name"]: x for x in doc["entries"]}
        check(sorted(e) == ["blob", "count", "dt", "empty", "flags", "grid", "ids", "label", "on", "special", "zero_d"],
              "ls --json %s: names" % ck, str(sorted(e)))
        check(e["grid"]["dtype"] == "f32" and e["grid"]["shape"] == [7, 5, 3] and e["grid"]["bytes"] == 420,
              "ls --json %s: grid" % ck, str(e["grid"]))
        check(e["count"]["value"] == 2**64 - 1, "ls --json %s: u64 value exact" % ck, str(e["count"]))
        check(e["dt"]["value"] == 0.5 and e["on"]["value"] is True, "ls --json %s: f32 / bool values" % ck)
        check(e["label"]["value"] == 'hello "cairn"\n', "ls --json %s: string value" % ck, str(e["label"]))
        check(e["blob"]["kind"] == "bytes" and e["blob"]["length"] == 20, "ls --json %s: blob" % ck, str(e["blob"]))
        check(e["zero_d"]["shape"] == [] and e["empty"]["shape"] == [0, 4] and e["empty"]["bytes"] == 0,
              "ls --json %s: 0-d and empty arrays" % ck)

    # ls -D: every chunk (box, file, offset, bytes), like bpls -D.
    r = cairn("ls", "-D", p("rich"))
    chunks = re.findall(r"^      (\[[^]]*\])  (\S+)  offset (\d+), (\d+) bytes$", r.stdout, re.M)
    grid = [c for c in chunks if c[0] in ("[0:7, 0:2, 0:3]", "[0:7, 2:5, 0:3]")]
    check(sorted((c[0], c[1], c[3]) for c in grid) == [("[0:7, 0:2, 0:3]", "__0_0.distcp", "168"),
                                                       ("[0:7, 2:5, 0:3]", "__1_0.distcp", "252")],
          "ls -D: grid's two chunks, their boxes, files and bytes", r.stdout)
    check(("[]", "__0_0.distcp") in [(c[0], c[1]) for c in chunks] and len(chunks) == 8,
          "ls -D: one line per chunk, 0-d arrays as []", r.stdout)
    check(re.search(r"^  blob +bytes +20 bytes\n      \[0:20\]  __\d_0\.distcp  offset \d+, 20 bytes$", r.stdout, re.M),
          "ls -D: a blob's chunk", r.stdout)
    doc = json.loads(cairn("ls", "-D", "--json", p("rich.h5")).stdout)
    e = {x["name"]: x for x in doc["entries"]}
    check(sorted((tuple(map(tuple, c["box"])), c["file"], c["bytes"]) for c in e["grid"]["decomposition"]) ==
          [(((0, 7), (0, 2), (0, 3)), "/grid", 168), (((0, 7), (2, 5), (0, 3)), "/grid", 252)] and
          e["empty"]["decomposition"] == [] and "decomposition" not in e["count"],
          "ls -D --json: a container's chunks", str(e["grid"]))
    # ls -l: min and max of every array, like bpls -l.
    r = cairn("ls", "-l", p("rich"))
    for name, lo, hi in (("grid", "0", "642"), ("ids", "-5", "25"), ("special", "-2.25", "inf"), ("flags", "false", "true"),
                         ("zero_d", "3.25", "3.25")):
        check(re.search(r"^  %s .* bytes, min %s, max %s$" % (name, re.escape(lo), re.escape(hi)), r.stdout, re.M),
              "ls -l: %s from %s to %s (NaN left out)" % (name, lo, hi), r.stdout)
    check(re.search(r"^  empty .* 0 bytes$", r.stdout, re.M), "ls -l: no min and max of an empty array", r.stdout)
    doc = json.loads(cairn("ls", "-l", "--json", p("rich_mod")).stdout)
    e = {x["name"]: x for x in doc["entries"]}
    check((e["grid"]["min"], e["grid"]["max"], e["ids"]["min"], e["ids"]["max"], e["empty"]["min"]) == (-1, 642, -5, 22, None),
          "ls -l --json: min and max as numbers", str(doc["entries"]))
    # Over several passes and ranks: against every value `cat` prints.
    values = [float(v) for v in numbers(cairn("cat", p("heat"), "temperature").stdout)]
    r = cairn("--memory", "1", "ls", "-l", p("heat"))
    m = re.search(r"^  temperature .* min (\S+), max (\S+)$", r.stdout, re.M)
    check(m and len(values) == 180000 and (float(m.group(1)), float(m.group(2))) == (min(values), max(values)),
          "ls -l: heat2d's min and max in passes, as cat's values", r.stdout)
    # A per-rank checkpoint's metadata.h5 stands for its directory.
    r = cairn("ls", p("rich/metadata.h5"))
    check(r.stdout.startswith(p("rich") + ": per-rank layout"), "ls CKPT/metadata.h5: the checkpoint", r.stdout + r.stderr)
    check(numbers(cairn("cat", p("rich/metadata.h5"), "ids").stdout) == [str(3 * i - 5) for i in range(11)],
          "cat CKPT/metadata.h5")
    check(": OK" in cairn("verify", p("rich/metadata.h5")).stdout, "verify CKPT/metadata.h5")
    check("are equal" in cairn("diff", p("rich/metadata.h5"), p("rich.h5")).stdout, "diff CKPT/metadata.h5 CKPT")
    r = cairn("repair", p("rich/metadata.h5"))
    check(p("rich") + ": nothing to repair" in r.stdout, "repair CKPT/metadata.h5: the checkpoint", r.stdout)
    os.makedirs(p("cont"))
    cairn("convert", p("rich"), p("cont/metadata.h5"))
    check(cairn("ls", p("cont/metadata.h5")).stdout.startswith(p("cont/metadata.h5") + ": container layout"),
          "ls of a container named metadata.h5: the container")


# ---- cat -----------------------------------------------------------------------
def section_cat():
    r = cairn("cat", p("rich"), "grid", "--slice", "1:6:2,-1,0:3")
    want = [str(100 * i + 10 * 4 + k) for i in (1, 3, 5) for k in range(3)]
    check(numbers(r.stdout) == want, "cat grid --slice 1:6:2,-1,0:3", r.stdout)
    check(r.stdout.splitlines()[0].startswith("(1,4,0) "), "cat: rows named by their first index", r.stdout)
    r = cairn("cat", p("rich.h5"), "grid", "--slice", ":,1")
    want = [str(100 * i + 10 + k) for i in range(7) for k in range(3)]
    check(numbers(r.stdout) == want, "cat container grid --slice :,1", r.stdout)
    r = cairn("cat", p("rich"), "ids")
    check(numbers(r.stdout) == [str(3 * i - 5) for i in range(11)], "cat ids (two lines)", r.stdout)
    check(len(r.stdout.splitlines()) == 2 and r.stdout.splitlines()[1].startswith("(10) "), "cat: 10 values a line",
          r.stdout)
    r = cairn("cat", p("rich"), "special")
    check(numbers(r.stdout) == ["0", "nan", "-0", "inf", "1.5", "-2.25"], "cat special floats", r.stdout)
    check(numbers(cairn("cat", p("rich"), "flags").stdout) == ["true", "false", "false", "true"], "cat bool")
    check(cairn("cat", p("rich"), "zero_d").stdout == "3.25\n", "cat 0-d array")
    check(cairn("cat", p("rich"), "empty").stdout == "", "cat empty array prints nothing")
    check(cairn("cat", p("rich"), "count").stdout == "18446744073709551615\n", "cat u64 scalar")
    check(cairn("cat", p("rich"), "label").stdout == 'hello "cairn"\n\n', "cat string, raw")
    r = cairn("cat", p("rich"), "blob")
    check(r.stdout == "00000000: " + " ".join("%02x" % b for b in range(16)) + "\n00000010: 10 11 12 13\n",
          "cat bytes as hex", r.stdout)
    check(cairn("cat", p("rich.h5"), "blob", "-s", "-2:").stdout == "00000012: 12 13\n", "cat container bytes slice")
    r = cairn("--memory", "1", "cat", p("minimal"), "u", "-s", "::3")
    check(numbers(r.stdout) == [str(i) for i in range(0, 20, 3)], "cat minimal u ::3", r.stdout)
    r = cairn("--memory", "1", "cat", p("heat"), "temperature", "-s", "::100,299")
    vals = numbers(r.stdout)
    check(len(vals) == 6 and all(re.match(r"^-?[0-9.e+-]+$", v) for v in vals), "cat heat2d column", r.stdout)


# ---- verify --------------------------------------------------------------------
def section_verify():
    r = cairn("verify", p("rich"))
    check(re.search(r": OK: \d+ chunks", r.stdout), "verify: OK line", r.stdout)
    r = cairn("verify", "--strict", p("rich.h5"))    # containers carry checksums too
    check(re.search(r": OK: \d+ chunks", r.stdout), "verify container: OK line", r.stdout)
    shutil.copytree(p("minimal"), p("flipped"))
    with open(p("flipped/__1_0.distcp"), "r+b") as f:
        f.seek(13)
        b = f.read(1)
        f.seek(13)
        f.write(bytes([b[0] ^ 0x10]))
    r = cairn("verify", p("flipped"), expect=1)
    check("DAMAGED" in r.stdout and "'u'" in r.stdout and "__1_0.distcp" in r.stdout,
          "verify: a flipped bit is reported, naming the array and the file", r.stdout + r.stderr)
    cairn("verify", "-q", p("minimal"))   # the original is intact
    doc = json_of(cairn("verify", "--json", p("rich")), "verify --json")
    check(doc and doc["status"] == "ok" and doc["checksums"] is True and doc["chunks"] >= 8 and doc["bytes"] > 0 and
          doc["problems"] == [] and doc["layout"] == "distcp" and doc["checkpoint"] == p("rich"),
          "verify --json: an intact checkpoint", str(doc))
    doc = json_of(cairn("verify", "--json", p("flipped"), expect=1), "verify --json of damage")
    check(doc and doc["status"] == "damaged" and len(doc["problems"]) == 1 and "__1_0.distcp" in doc["problems"][0] and
          "'u'" in doc["problems"][0], "verify --json: the damage, naming the file and the array", str(doc))


# ---- convert (later sections read what it writes) -----------------------------
def convert_there_and_back(src, mid, back):
    cairn("--memory", "1", "convert", p(src), p(mid))
    cairn("--memory", "1", "convert", p(mid), p(back))
    check(json.loads(cairn("ls", "--json", p(mid)).stdout)["layout"] == "container", "convert to .h5: container")
    back_doc = json.loads(cairn("ls", "--json", p(back)).stdout)
    check(back_doc["layout"] == "distcp", "convert back: per-rank")
    check(back_doc["world_size"] == ARGS.np, "convert: saved on N ranks")
    for a, b in ((src, mid), (src, back), (mid, back)):
        r = cairn("--memory", "1", "diff", p(a), p(b), expect=0)
        check("are equal" in r.stdout, "diff %s %s: equal" % (a, b), r.stdout)


def section_convert_heat():
    convert_there_and_back("heat", "heat_c.h5", "heat_back")


def section_convert():
    convert_there_and_back("rich", "rich_c.h5", "rich_back")
    ja = {x["name"]: x for x in json.loads(cairn("ls", "--json", p("rich")).stdout)["entries"]}
    jb = {x["name"]: x for x in json.loads(cairn("ls", "--json", p("rich_back")).stdout)["entries"]}
    for x in (ja, jb):
        for v in x.values():
            v.pop("chunks", None)
    check(ja == jb, "convert keeps every entry, dtype, shape and value", "%s\n%s" % (ja, jb))
    cairn("convert", p("rich"), p("rich_c.h5"), expect=2)            # exists
    cairn("convert", "--force", p("rich"), p("rich_c.h5"))
    cairn("convert", "--layout", "container", p("minimal"), p("minimal_container"))
    check(os.path.isfile(p("minimal_container")), "convert --layout container writes one file")
    # MPI-IO hints for the containers read and written, and no checksums in DST.
    cairn("convert", "--hint", "romio_cb_write=enable", "--hint", "cairn_unknown_hint=1", "--checksum-block", "0",
          p("rich"), p("rich_plain.h5"))
    check(json.loads(cairn("ls", "--json", p("rich_plain.h5")).stdout)["checksum_block"] == 0,
          "convert --checksum-block 0: a container without checksums")
    check(json.loads(cairn("ls", "--json", p("rich_c.h5")).stdout)["checksum_block"] == 1 << 20,
          "convert: checksums per MiB by default")
    cairn("convert", "--hint", "cb_nodes=1", p("rich_plain.h5"), p("rich_plain_back"))
    r = cairn("diff", p("rich"), p("rich_plain_back"), expect=0)
    check("are equal" in r.stdout, "convert with hints, without checksums, and back: equal", r.stdout)
    doc = json_of(cairn("verify", "--json", p("rich_plain.h5")), "verify --json without checksums")
    check(doc and doc["status"] == "readable" and doc["checksums"] is False and doc["bytes_read"] > 0 and
          doc["layout"] == "container", "verify --json: a container without checksums, read", str(doc))
    cairn("verify", "--json", "--strict", p("rich_plain.h5"), expect=1)
    # The hints reach the files of both layouts, as CAIRN_LOG=debug shows: a
    # container read, per-rank files written, then those read. cb_buffer_size is
    # a hint that Open MPI's components and ROMIO (MPICH) all report back.
    debug = dict(ENV, CAIRN_LOG="debug")
    r = cairn("convert", "--hint", "cb_buffer_size=8388608", p("rich_plain.h5"), p("rich_hinted"), env=debug)
    # On one rank the container is read through HDF5's serial driver, which
    # opens no MPI-IO file (and takes no hints); on several, through MPI-IO.
    container_read = re.search(r"\[world rank \d+\] \S*rich_plain\.h5: MPI-IO hints: cb_buffer_size=8388608\n", r.stderr)
    check(bool(container_read) == (ARGS.np > 1), "convert --hint: the container read with the hint on several ranks, "
          "through the serial driver on one", r.stderr[-3000:])
    check(re.search(r"\[world rank \d+\] \S*rich_hinted[^:]*/__0_0\.distcp: MPI-IO hints: cb_buffer_size=8388608\n", r.stderr),
          "convert --hint: the per-rank files written with the hint", r.stderr[-3000:])
    r = cairn("convert", "--hint", "cb_buffer_size=4194304", p("rich_hinted"), p("rich_hinted.h5"), env=debug)
    check(re.search(r"\[world rank \d+\] \S*rich_hinted/__0_0\.distcp: MPI-IO hints: cb_buffer_size=4194304\n", r.stderr),
          "convert --hint: the per-rank files read with the hint", r.stderr[-3000:])
    check(re.search(r"\[world rank \d+\] \S*rich_hinted\.h5\.cairn-tmp: MPI-IO hints: cb_buffer_size=4194304\n", r.stderr),
          "convert --hint: the container written with the hint", r.stderr[-3000:])
    r = cairn("convert", p("rich_hinted.h5"), p("rich_unhinted"), env=debug)
    check("MPI-IO hints" not in r.stderr, "convert without --hint: no hints line", r.stderr[-3000:])
    r = cairn("diff", p("rich"), p("rich_unhinted"), expect=0)
    check("are equal" in r.stdout, "convert with hints through both layouts: equal", r.stdout)
    doc = json_of(cairn("diff", "--json", p("rich"), p("rich_back")), "diff --json of equal checkpoints")
    check(doc and doc["equal"] is True and doc["differences"] == [] and doc["entries"] == 11,
          "diff --json: equal", str(doc))


# ---- diff ----------------------------------------------------------------------
def section_diff():
    r = cairn("diff", p("rich"), p("rich_mod"), expect=1)
    check("grid: 1 of 105 elements differ, first at [5, 4, 2]: 542 vs -1" in r.stdout, "diff: changed grid value",
          r.stdout)
    check("ids: 1 of 11 elements differ, first at [10]: 25 vs 0" in r.stdout, "diff: changed ids value", r.stdout)
    check("differ in 2 of 11 entries" in r.stdout, "diff: summary", r.stdout)
    # The largest difference of an array.
    check("grid: 1 of 105 elements differ, first at [5, 4, 2]: 542 vs -1; largest difference 543 at [5, 4, 2]"
          in r.stdout, "diff: the largest difference", r.stdout)
    r = cairn("--memory", "1", "diff", p("heat"), p("heat6"), expect=1)
    check("step: 5 vs 6" in r.stdout, "diff: scalar", r.stdout)
    check(re.search(r"temperature: \d+ of 180000 elements differ, first at \[\d+, \d+\]", r.stdout),
          "diff: array over several passes", r.stdout)
    m = re.search(r"temperature: \d+ of 180000 elements differ, first at \[\d+, \d+\]: \S+ vs \S+; "
                  r"largest difference (\S+) at \[\d+, \d+\]", r.stdout)
    check(m, "diff: an array's largest difference over several passes", r.stdout)
    r = cairn("diff", p("minimal"), p("rich"), expect=1)
    check("u: only in " + p("minimal") in r.stdout and "grid: only in " + p("rich") in r.stdout, "diff: key sets",
          r.stdout)
    r = cairn("diff", "--max-lines", "1", p("minimal"), p("rich"), expect=1)
    check("... and 12 more" in r.stdout, "diff --max-lines", r.stdout)
    # The summary counts the union of both entry sets, in the singular for one.
    check("differ in 13 of 13 entries" in r.stdout, "diff: of the union of the entries", r.stdout)
    r = cairn("diff", p("rich"), p("one"), expect=1)
    check("differ in 10 of 11 entries" in r.stdout, "diff: a subset, of the union", r.stdout)
    r = cairn("diff", p("one"), p("one"), expect=0)
    check(r.stdout.endswith("are equal (1 entry)\n"), "diff: 1 entry", r.stdout)
    r = cairn("diff", p("one"), p("one_mod"), expect=1)
    check("differ in 1 of 1 entry\n" in r.stdout, "diff: 1 of 1 entry", r.stdout)
    # Tolerances: --abs D like h5diff -d, --rel P like h5diff -p.
    r = cairn("diff", "--abs", "30", p("rich"), p("rich_mod"), expect=1)
    check("grid: 1 of 105 elements differ" in r.stdout and "ids:" not in r.stdout and
          "differ within --abs 30 in 1 of 11 entries" in r.stdout, "diff --abs 30: ids (25) within, grid (543) not",
          r.stdout)
    r = cairn("diff", "--abs", "543", p("rich"), p("rich_mod"), expect=0)
    check("are equal within --abs 543 (11 entries)" in r.stdout, "diff --abs 543: equal", r.stdout)
    r = cairn("diff", "--rel", "1.0005", p("rich"), p("rich_mod"), expect=1)
    check("grid: 1 of 105" in r.stdout and "ids:" not in r.stdout,
          "diff --rel: |25 - 0| <= 1.0005 * 25 but |542 - -1| > 1.0005 * 542", r.stdout)
    r = cairn("diff", "--rel", "1.002", p("rich"), p("rich_mod"), expect=0)
    check("are equal within --rel 1.002" in r.stdout, "diff --rel 1.002: equal", r.stdout)
    r = cairn("diff", "--abs", "1", "--rel", "1.0005", p("rich"), p("rich_mod"), expect=1)
    check("grid:" in r.stdout and "ids:" not in r.stdout, "diff --abs --rel: either suffices", r.stdout)
    if m:
        largest = float(m.group(1))
        check(0 < largest < 1, "diff: heat2d's largest difference between steps 5 and 6", r.stdout)
        r = cairn("--memory", "1", "diff", "--abs", repr(largest), p("heat"), p("heat6"), expect=1)
        check("temperature" not in r.stdout and "step: 5 vs 6" in r.stdout and "differ within --abs" in r.stdout,
              "diff --abs LARGEST: the array within, the scalar not", r.stdout)
        r = cairn("--memory", "1", "diff", "--abs", "1", p("heat"), p("heat6"), expect=0)
        check("are equal within --abs 1 (2 entries)" in r.stdout, "diff --abs 1: equal", r.stdout)
        r = cairn("--memory", "1", "diff", "--abs", repr(largest * 0.999), p("heat"), p("heat6"), expect=1)
        m2 = re.search(r"temperature: ([1-9]\d*) of 180000 elements differ, .*; largest difference (\S+) at", r.stdout)
        check(m2 and float(m2.group(2)) == largest, "diff --abs just below LARGEST: the elements outside, the same largest",
              r.stdout)
    # diff --json: every differing entry, whatever --max-lines says.
    doc = json_of(cairn("diff", "--json", "--max-lines", "0", p("rich"), p("rich_mod"), expect=1), "diff --json")
    if doc:
        d = {x["name"]: x for x in doc["differences"]}
        check(doc["equal"] is False and doc["entries"] == 11 and doc["different"] == 2 and sorted(d) == ["grid", "ids"] and
              doc["tolerance"] == {"abs": None, "rel": None}, "diff --json: the summary", str(doc))
        g = d.get("grid", {})
        check(g.get("what") == "elements" and g.get("count") == 1 and g.get("of") == 105 and
              g.get("first") == {"index": [5, 4, 2], "a": 542, "b": -1} and
              g.get("largest") == {"difference": 543, "index": [5, 4, 2]}, "diff --json: an array's record", str(g))
    doc = json_of(cairn("diff", "--json", p("minimal"), p("rich"), expect=1), "diff --json of key sets")
    if doc:
        d = {x["name"]: x["what"] for x in doc["differences"]}
        check(doc["entries"] == 13 and doc["different"] == 13 and d.get("u") == "only_in_a" and
              d.get("grid") == "only_in_b", "diff --json: entries only in one", str(doc))
    doc = json_of(cairn("--memory", "1", "diff", "--json", "--rel", "0.1", p("heat"), p("heat6"), expect=1),
                  "diff --json --rel")
    if doc:
        d = {x["name"]: x for x in doc["differences"]}
        check(doc["tolerance"] == {"abs": None, "rel": 0.1} and
              d.get("step") == {"name": "step", "what": "value", "a": 5, "b": 6},
              "diff --json: a scalar's record and the tolerance", str(doc))
    r = cairn("diff", "--abs", "-1", p("rich"), p("rich_mod"), expect=2)
    check("--abs" in r.stderr, "diff --abs -1: refused", r.stderr)


# ---- checkpoint manager directories --------------------------------------------
def section_manager():
    r = cairn("ls", p("mgr"))
    check(re.search(r"mgr: checkpoint manager directory, 2 steps, LATEST step_00000006\n", r.stdout) and
          re.search(r"^  4  step_00000004  per-rank, 2 ranks, 2 entries, .*B, \S+$", r.stdout, re.M) and
          re.search(r"^  6  step_00000006  per-rank, 2 ranks, 2 entries, .*  \(default\)$", r.stdout, re.M),
          "ls MANAGER: its steps, the default marked", r.stdout)
    doc = json_of(cairn("ls", "--json", p("mgr_c")), "ls --json MANAGER")
    check(doc and doc["default_step"] == 6 and doc["LATEST"] == "step_00000006.h5" and
          [(x["step"], x["name"], x["layout"], x["entries"]) for x in doc["steps"]] ==
          [(3, "step_00000003.h5", "container", 2), (6, "step_00000006.h5", "container", 2)],
          "ls --json MANAGER: steps of containers", str(doc))
    r = cairn("ls", p("mgr/LATEST"))
    check(r.stdout.startswith(p("mgr/step_00000006") + ": per-rank layout"), "ls MANAGER/LATEST: the checkpoint it names",
          r.stdout)
    r = cairn("ls", "--step", "4", p("mgr"))
    check(r.stdout.startswith(p("mgr/step_00000004") + ": per-rank layout") and "step         scalar  i64   = 4" in r.stdout,
          "ls --step 4 MANAGER: that checkpoint's entries", r.stdout)
    check(cairn("cat", p("mgr"), "step").stdout == "6\n", "cat MANAGER: the default step")
    check(cairn("cat", "--step", "4", p("mgr"), "step").stdout == "4\n", "cat --step 4 MANAGER")
    check(cairn("cat", p("mgr_c/LATEST"), "step").stdout == "6\n", "cat MANAGER/LATEST")
    r = cairn("verify", p("mgr_c"))
    check(p("mgr_c/step_00000006.h5") + ": OK" in r.stdout, "verify MANAGER: the default step", r.stdout)
    r = cairn("--memory", "1", "diff", p("mgr"), p("heat6"))
    check("are equal (2 entries)" in r.stdout, "diff MANAGER CKPT: step 6 is heat2d's step 6", r.stdout)
    r = cairn("--memory", "1", "diff", p("mgr"), p("mgr_c"))
    check("are equal (2 entries)" in r.stdout, "diff MANAGER MANAGER: per-rank and container", r.stdout)
    r = cairn("diff", "--step", "6", p("mgr"), p("heat6"))
    check("are equal" in r.stdout, "diff --step 6 MANAGER CKPT", r.stdout)
    r = cairn("diff", "--step", "4", p("mgr"), p("mgr/LATEST"), expect=1)
    check("step: 4 vs 6" in r.stdout, "diff --step 4 MANAGER MANAGER/LATEST: --step applies to the directory", r.stdout)
    cairn("convert", "--step", "3", p("mgr_c"), p("mgr_step3"))
    check(cairn("cat", p("mgr_step3"), "step").stdout == "3\n", "convert --step 3 MANAGER DST")
    # The default follows LATEST while it names a committed checkpoint, else the highest step.
    with open(p("mgr/LATEST"), "w") as f:
        f.write("step_00000004\n")
    check(cairn("cat", p("mgr"), "step").stdout == "4\n", "cat MANAGER: the step LATEST names")
    check(re.search(r"^  4  step_00000004 .*\(default\)$", cairn("ls", p("mgr")).stdout, re.M), "ls MANAGER: LATEST's default")
    with open(p("mgr/LATEST"), "w") as f:
        f.write("../rich\n")
    check(cairn("cat", p("mgr"), "step").stdout == "6\n", "cat MANAGER: the highest step when LATEST names none")
    r = cairn("cat", p("mgr/LATEST"), "step", expect=2)
    check("names '../rich', not a checkpoint of the manager" in r.stderr, "MANAGER/LATEST naming no checkpoint: an error",
          r.stderr)
    with open(p("mgr/LATEST"), "w") as f:
        f.write("step_00000006\n")
    for args, needle in ((["cat", "--step", "5", p("mgr"), "step"], "no checkpoint of step 5 (steps: 4, 6)"),
                         (["verify", "--step", "4", p("rich")], p("rich") + " is not a checkpoint manager directory"),
                         (["ls", "--step", "4", p("mgr/LATEST")], "pass its manager directory"),
                         (["diff", "--step", "4", p("rich"), p("rich_mod")], "neither " + p("rich") + " nor")):
        r = cairn(*args, expect=2)
        check(needle in r.stderr, "error for %s names %r" % (" ".join(args), needle), r.stderr)
    os.makedirs(p("mgr_empty"))
    with open(p("mgr_empty/LATEST"), "w") as f:
        f.write("step_00000001\n")
    check("0 steps" in cairn("ls", p("mgr_empty")).stdout, "ls of a manager directory without checkpoints")
    r = cairn("cat", p("mgr_empty"), "step", expect=2)
    check("without a committed checkpoint" in r.stderr, "cat of a manager directory without checkpoints", r.stderr)


# ---- CAIRN_LOG -----------------------------------------------------------------
def section_log():
    r = cairn("convert", "-q", "--force", p("minimal"), p("logged.h5"), env=dict(ENV, CAIRN_LOG="info"))
    for phase in ("plan", "exchange", "write", "commit"):
        check(re.search(r"^cairn: save '.*logged\.h5': %s [0-9.]+ s" % phase, r.stderr, re.M),
              "CAIRN_LOG=info: save phase " + phase, r.stderr)
    check(re.search(r"^cairn: save '.*': write [0-9.]+ s, 160 B, .*B/s$", r.stderr, re.M),
          "CAIRN_LOG=info: write bytes and bandwidth", r.stderr)
    check(re.search(r"^cairn: load '.*minimal': read [0-9.]+ s, \d+ B, .*B/s$", r.stderr, re.M),
          "CAIRN_LOG=info: load read phase", r.stderr)
    check("[rank" not in r.stderr, "CAIRN_LOG=info: no per-rank lines", r.stderr)
    r = cairn("verify", p("minimal"), env=dict(ENV, CAIRN_LOG="debug"))
    check(re.search(r"^cairn: \[rank 0\] verify '.*minimal': verify ", r.stderr, re.M), "CAIRN_LOG=debug: rank lines",
          r.stderr)
    r = cairn("verify", p("minimal"))
    check("cairn:" not in r.stderr, "no log without CAIRN_LOG", r.stderr)


# ---- repair --------------------------------------------------------------------
def section_repair():
    # A replacement interrupted between its two renames: the old checkpoint moved
    # aside, the new one still under its staging name, nothing at the path.
    def interrupted(path, new, old):
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(new, path + ".cairn-staging")
        shutil.copytree(old, path + ".cairn-old")


    interrupted(p("swap"), p("heat6"), p("heat"))
    for verb in (["ls"], ["verify"]):
        r = cairn(*(verb + [p("swap")]), expect=2)
        check(p("swap.cairn-staging") in r.stderr and "cairn repair " + p("swap") in r.stderr,
              "%s of an interrupted replacement names the complete sibling and the repair" % verb[0], r.stderr)
    r = cairn("repair", p("swap"))
    check(re.search(r"^renamed .*swap\.cairn-staging: .*renamed to swap$", r.stdout, re.M) and
          re.search(r"^removed .*swap\.cairn-old: ", r.stdout, re.M) and "repaired" in r.stdout,
          "repair: puts the new checkpoint in place and removes the old one", r.stdout + r.stderr)
    check(not os.path.exists(p("swap.cairn-staging")) and not os.path.exists(p("swap.cairn-old")),
          "repair: no sibling left")
    cairn("diff", p("swap"), p("heat6"))  # the new one (exit 0: equal)
    r = cairn("repair", p("swap"))
    check("nothing to repair" in r.stdout, "repair again: nothing to repair", r.stdout)
    # A directory of checkpoints (a CheckpointManager root): every leftover in it.
    os.makedirs(p("mroot"))
    interrupted(p("mroot/step_00000006"), p("heat6"), p("heat"))
    with open(p("mroot/LATEST.cairn-tmp"), "w") as f:
        f.write("step_")
    r = cairn("repair", p("mroot"))
    check(sorted(os.listdir(p("mroot"))) == ["step_00000006"] and "LATEST.cairn-tmp" in r.stdout and
          "renamed" in r.stdout, "repair ROOT: finishes the replacement, removes the leftovers",
          r.stdout + str(sorted(os.listdir(p("mroot")))))
    cairn("diff", p("mroot/step_00000006"), p("heat6"))
    r = cairn("repair", p("nothing"), expect=2)
    check("nothing at " + p("nothing") in r.stderr, "repair of nothing: an error naming the path", r.stderr)


# ---- bad input -----------------------------------------------------------------
def section_bad_input():
    for args, needle in ((["ls", p("nothing")], p("nothing")),
                         (["cat", p("nothing.h5"), "u"], p("nothing.h5")),
                         (["verify", p("nothing")], p("nothing")),
                         (["diff", p("rich"), p("nothing")], p("nothing")),
                         (["convert", p("nothing"), p("x.h5")], p("nothing")),
                         (["convert", "--hint", "striping_factor", p("rich"), p("y.h5")], "--hint must be KEY=VALUE"),
                         (["convert", "--hint", "=4", p("rich"), p("y.h5")], "--hint must be KEY=VALUE, not '=4'"),
                         (["convert", "--hint", "k" * 300 + "=1", p("rich.h5"), p("y.h5")], "MPI-IO hint 'kkk"),
                         (["cat", p("rich"), "nope"], "no entry 'nope'"),
                         (["cat", p("rich"), "grid", "--slice", "0:2,x"], "bad slice '0:2,x'"),
                         (["cat", p("rich"), "grid", "--slice", "1,2,3,4"], "bad slice"),
                         (["cat", p("rich"), "grid", "--slice", "9"], "out of range"),
                         (["cat", p("rich"), "dt", "--slice", "0"], "not an array"),
                         (["ls", p("rich/__0_0.distcp")], "rich"),
                         (["frobnicate"], ""),
                         (["ls"], "CKPT")):
        r = cairn(*args, expect=2)
        check(needle in r.stderr, "error for %s names %r" % (" ".join(args), needle), r.stderr)
        # (mpiexec itself reports "aborted" for any nonzero exit status.)
        check(not re.search(r"terminate called|Signal:|signal \d+|core dumped|MPI_ABORT", r.stderr),
              "no crash for " + " ".join(args), r.stderr)
    r = cairn("--help")
    check("Exit status" in r.stdout and "2  error" in r.stdout, "--help documents exit codes", r.stdout)


# ---- hostile files: only regular files inside the checkpoint are read ----------
def section_hostile():
    outside = p("outside")
    os.makedirs(outside)
    # A data file that is a symbolic link to a copy outside the checkpoint.
    shutil.copytree(p("rich"), p("rich_link"))
    shutil.move(p("rich_link/__0_0.distcp"), os.path.join(outside, "copy.distcp"))
    os.symlink(os.path.join(outside, "copy.distcp"), p("rich_link/__0_0.distcp"))
    r = cairn_soon("cat", p("rich_link"), "grid")
    check("__0_0.distcp: is a symbolic link" in r.stderr and r.stdout == "",
          "cat: a data file that is a symbolic link is refused", r.stdout + r.stderr)
    r = cairn_soon("verify", p("rich_link"), expect=1)
    check("DAMAGED" in r.stdout and "is a symbolic link" in r.stdout, "verify: a symbolic link is damage",
          r.stdout + r.stderr)
    # FIFOs named like a data file and like metadata.h5: refused, never waited on.
    shutil.copytree(p("rich"), p("rich_fifo"))
    os.remove(p("rich_fifo/__1_0.distcp"))
    os.mkfifo(p("rich_fifo/__1_0.distcp"))
    r = cairn_soon("cat", p("rich_fifo"), "grid")
    check("__1_0.distcp: not a regular file (a FIFO)" in r.stderr, "cat: a FIFO data file is refused", r.stderr)
    r = cairn_soon("verify", p("rich_fifo"), expect=1)
    check("not a regular file (a FIFO)" in r.stdout, "verify: a FIFO data file is damage", r.stdout + r.stderr)
    shutil.copytree(p("rich"), p("rich_fifo_md"))
    os.remove(p("rich_fifo_md/metadata.h5"))
    os.mkfifo(p("rich_fifo_md/metadata.h5"))
    for verb in (["ls"], ["verify"], ["cat"]):
        args = verb + [p("rich_fifo_md")] + (["ids"] if verb == ["cat"] else [])
        r = cairn_soon(*args)
        check("metadata.h5: not a regular file (a FIFO)" in r.stderr, "%s: a FIFO metadata.h5 is refused" % verb[0],
              r.stderr)
    # The checkpoint path itself may be a symbolic link.
    os.symlink(p("rich"), p("rich_alias"))
    check(numbers(cairn("cat", p("rich_alias"), "ids").stdout) == [str(3 * i - 5) for i in range(11)],
          "cat through a symbolic link to the checkpoint")
    # A container dataset whose bytes are an outside file (external raw storage):
    # never read, also without checksums; the outside values never printed.
    shutil.copy(p("rich_plain.h5"), p("rich_external.h5"))
    secret = os.path.join(outside, "secret.raw")
    with open(secret, "wb") as f:
        f.write((777777).to_bytes(4, "little") * 11)
    run([ARGS.hostile, "external-storage", p("rich_external.h5"), "/ids", secret], expect=0)
    for verb in (["ls"], ["cat", "ids"], ["verify"]):
        args = [verb[0], p("rich_external.h5")] + verb[1:]
        r = cairn_soon(*args)
        check("dataset '/ids'" in r.stderr and "external raw storage" in r.stderr,
              "%s: a dataset with external raw storage is refused" % verb[0], r.stderr)
        check("777777" not in r.stdout, "%s: the outside file is not printed" % verb[0], r.stdout)
    # The scalar datasets of a container (for other readers) must hold the
    # metadata's values.
    shutil.copy(p("heat_c.h5"), p("heat_edited.h5"))
    cairn("verify", p("heat_edited.h5"))
    run([ARGS.hostile, "set-i64", p("heat_edited.h5"), "/step", "99"], expect=0)
    r = cairn_soon("verify", p("heat_edited.h5"), expect=1)
    check("DAMAGED" in r.stdout and "dataset '/step' of scalar 'step' holds 99, the metadata's value is 5" in r.stdout,
          "verify: a scalar dataset that differs from the metadata", r.stdout + r.stderr)
    check("DAMAGED: 1 problem (" in r.stdout, "verify: a damaged scalar is counted as a problem, not a chunk",
          r.stdout)


# ---- names with control characters and bytes that are not UTF-8 ----------------
def section_names():
    run([ARGS.hostile, "names", p("names")], expect=0)
    r = subprocess.run([ARGS.cairn, "ls", p("names")] if ARGS.np == 1 else mpi(ARGS.np, ARGS.cairn, "ls", p("names")),
                       capture_output=True, env=ENV, timeout=240)
    out = r.stdout.decode("utf-8", errors="replace")
    check(r.returncode == 0, "ls of odd names", r.stderr.decode(errors="replace"))
    check("\x1b" not in out and "\ufffd" not in out and out.count("\n") == 5, "ls: no raw escape or newline from a name", repr(out))
    check(re.search(r"^  esc\\x1b\[31mred +scalar +i64 += 1$", out, re.M) and
          re.search(r"^  two\\nlines +scalar +i64 += 2$", out, re.M) and
          re.search(r"^  bad\\xff +scalar +i64 += 3$", out, re.M), "ls: names escaped", out)
    doc = json.loads(cairn("ls", "--json", p("names")).stdout)
    check(sorted(x["name"] for x in doc["entries"]) == ["bad\ufffd", "esc\x1b[31mred", "two\nlines"],
          "ls --json: names as JSON strings", str(doc["entries"]))


# ---- progress bar (a terminal only exists for a serial run) ----------------------
def section_progress():
    if ARGS.np != 1:
        return
    def on_terminal(*args):
        master, slave = pty.openpty()
        proc = subprocess.Popen([ARGS.cairn] + list(args), stdout=subprocess.DEVNULL, stderr=slave, env=ENV)
        os.close(slave)
        data = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        os.close(master)
        return proc.wait(timeout=240), data.decode(errors="replace")

    rc, err = on_terminal("--memory", "1", "diff", p("heat"), p("heat_back"))
    check(rc == 0 and re.search(r"diff \[[#.]+\] +\d+%", err), "progress bar on a terminal", repr(err))
    rc, err = on_terminal("--quiet", "--memory", "1", "diff", p("heat"), p("heat_back"))
    check(rc == 0 and "[" not in err, "--quiet: no progress bar", repr(err))
    r = cairn("--memory", "1", "diff", p("heat"), p("heat_back"))
    check("\r" not in r.stderr and "%" not in r.stderr, "no progress bar when stderr is not a terminal", r.stderr)


def guarded(section):
    """Runs one section; an exception in it is a failure of the test, and the
    other sections go on."""
    t0 = time.monotonic()
    try:
        section()
    except Exception:
        check(False, "%s raised" % section.__name__, traceback.format_exc())
    print("%s: %.1f s" % (section.__name__, time.monotonic() - t0), flush=True)


make_checkpoints()
if FAILURES:
    sys.exit("cli_test: could not write the checkpoints")
# The sections run concurrently (each its own files; each tool run is mostly
# the start of its MPI job); those reading what convert writes wait for it.
with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as pool:
    heat = pool.submit(guarded, section_convert_heat)
    rich = pool.submit(guarded, section_convert)
    rest = [pool.submit(guarded, s) for s in (section_diff, section_manager, section_ls, section_bad_input,
                                               section_cat, section_repair, section_verify, section_log,
                                               section_names)]
    heat.result()
    rest.append(pool.submit(guarded, section_progress))
    rich.result()
    rest.append(pool.submit(guarded, section_hostile))
    for f in rest:
        f.result()

if FAILURES:
    print("cli_test: %d failure(s)" % len(FAILURES), file=sys.stderr)
    sys.exit(1)
print("cli_test: all checks passed on %d rank(s)" % ARGS.np)

#!/usr/bin/env python3
"""Node-local checkpoints of heat2d across simulated hosts (python3 standard
library only), run by with_hosts.sh on 4 hosts (CAIRN_HOSTS_DIR set,
cairn-hosts on PATH). Every host sees its own node-local directory at
$CAIRN_HOSTS_DIR/local; the manager's root (under WORKDIR) is shared, as a
parallel file system is. Each job's hosts are a cairn-hosts SPEC (4x2: 8
ranks on host1..host4; 2,2,2: 6 ranks on host1..host3).

reshard REDUNDANCY...: for each redundancy (partner, xor:K), heat2d saves
  node-local steps on 4 hosts x 2 ranks; host4 is lost with its storage
  (wiped, and not in the next job); --resume on 3 hosts x 2 ranks must
  restart from the node-local level, resharded, with host4's files rebuilt,
  and end with the straight run's digest.

faults: heat2d on 4 hosts x 2 ranks, --redundancy xor:2 (groups host1+host2,
  host3+host4), a node-local step every 20 steps, every 2nd drained into the
  root. Kills of one rank (CAIRN_FAULT action=kill: SIGKILL at an injection
  point; mpirun then ends the job) in
    1. the drain of step 80 (drain.copy on rank 3),
    2. the node-local save of step 100 (its first data write on rank 5),
    3. the node-local commit of step 100 on host2 (the rename of its staging
       directory, rank 2), the other hosts' commits racing with the kill;
  after each: no rank left on any host, cairn_check_root passes on the root
  (its newest committed step still 40, what the killed drain left a
  leftover), `cairn steps` lists node-local step 80 (and 60 after kill 1;
  the save of step 100 reuses step 60's files); the runs
  after kills 1 and 2 resume from node-local step 80. After kills 2 and 3 a read-only
  --resume restarts from the node-local level (step 80, or after kill 3
  step 100 rebuilt from parity when the other hosts committed it) with the
  straight run's digest. Then host1 and host2 (one XOR group) are wiped: the
  resume warns that each node-local step is lost, naming the step, the XOR
  group and both hosts, falls back to the root's step 40 and ends with the
  straight run's digest (read only, as the other resumes that verify).

Shares kill_test.py's helpers (tests/crash).

usage: levels_hosts_test.py --heat2d BIN --checker BIN --cairn BIN --workdir DIR
                            (reshard REDUNDANCY... | faults)
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crash"))
from kill_test import check_root, digest_of, fail, indent  # noqa: E402

GRID = ["--nx", "96", "--ny", "80", "--steps", "120"]
EVERY = ["--checkpoint-every", "20"]


class Hosts:
    def __init__(self, args):
        self.args = args
        self.dir = os.environ.get("CAIRN_HOSTS_DIR")
        if not self.dir:
            fail("CAIRN_HOSTS_DIR is not set: run me through with_hosts.sh")
        self.local = os.path.join(self.dir, "local", "heat2d")

    def heat2d(self, spec, heat2d_args, name, fault=None, expect_ok=True):
        """heat2d on the hosts of SPEC; returns (status, stdout and stderr)."""
        log = os.path.join(self.args.workdir, name + ".log")
        cmd = ["cairn-hosts", "run", spec, "--", self.args.heat2d] + heat2d_args
        env = dict(os.environ)
        env.pop("CAIRN_FAULT", None)
        if fault:
            env["CAIRN_FAULT"] = fault
        print("  + %s%s" % ("CAIRN_FAULT=%s " % fault if fault else "", " ".join(cmd)), flush=True)
        t0 = time.monotonic()
        with open(log, "wb") as out:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
        text = open(log, errors="replace").read()
        print("    (status %d, %.1f s)" % (rc, time.monotonic() - t0), flush=True)
        if rc == 124:
            print(indent(text))
            fail("%s: the job ran past its time limit" % name)
        if expect_ok and rc != 0:
            print(indent(text))
            fail("%s: exit status %d" % (name, rc))
        return rc, text

    def exec(self, host, *cmd):
        return subprocess.run(["cairn-hosts", "exec", host] + list(cmd), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT).stdout.decode(errors="replace")

    def wipe(self, host):
        print("  + cairn-hosts wipe %s" % host, flush=True)
        if subprocess.run(["cairn-hosts", "wipe", host]).returncode != 0:
            fail("cairn-hosts wipe %s failed" % host)

    def no_ranks_left(self, hosts, what):
        for h in hosts:
            left = [l for l in self.exec(h, "ps", "-eo", "stat=,comm=").splitlines()
                    if l.split()[:1] and not l.split()[0].startswith("Z") and "heat2d" in l]
            if left:
                fail("%s: %s still runs %s" % (what, h, left))


def levels_of(h, redundancy):
    return ["--local-dir", h.local, "--redundancy", redundancy]


def resumed_line(text):
    """(level, step, files rebuilt or None) of heat2d's "resumed from" line."""
    m = re.search(r"^resumed from node-local storage \S+ at step (\d+) on \d+ ranks \((\d+) files rebuilt", text, re.M)
    if m:
        return "node-local", int(m.group(1)), int(m.group(2))
    m = re.search(r"^resumed from (\S+) at step (\d+) on", text, re.M)
    if m:
        return m.group(1), int(m.group(2)), None
    return None, None, None


def expect_digest(text, reference, what):
    if digest_of(text) != reference:
        print(indent(text))
        fail("%s: digest %s, expected the straight run's %s" % (what, digest_of(text), reference))


def reshard(args, h, reference, redundancies):
    for red in redundancies:
        name = red.replace(":", "")
        root = os.path.join(args.workdir, "root-" + name)
        # A fresh node-local directory on every host (the previous case's steps gone).
        for host in ("host1", "host2", "host3", "host4"):
            h.exec(host, "rm", "-rf", h.local)
        h.heat2d("4x2", ["--nx", "96", "--ny", "80", "--steps", "60"] + EVERY + ["--checkpoint-dir", root]
                 + levels_of(h, red), "save-" + name)
        h.wipe("host4")
        _, text = h.heat2d("2,2,2", GRID + EVERY + ["--resume", root] + levels_of(h, red), "resume-" + name)
        level, step, rebuilt = resumed_line(text)
        if level != "node-local" or step != 60 or not rebuilt:
            print(indent(text))
            fail("%s: 4 -> 3 hosts resumed from %s at step %s (%s files rebuilt), expected node-local step 60 "
                 "with host4's files rebuilt" % (red, level, step, rebuilt))
        expect_digest(text, reference, "%s: 4 -> 3 hosts" % red)
        print("  %s: 8 ranks on 4 hosts -> 6 ranks on 3 hosts, node-local step 60, %d files rebuilt, digest %s"
              % (red, rebuilt, reference), flush=True)


def killed(h, rc, text, point, call, rank, obj_pattern, what):
    """Checks that the job died of the injected kill and left nothing running."""
    note = re.search(r"^cairn: injected fault at %s \(call %d\) on rank %d: SIGKILL: (\S+)$"
                     % (re.escape(point), call, rank), text, re.M)
    if rc == 0 or digest_of(text) is not None or not note:
        print(indent(text))
        fail("%s: the job was not killed at %s (status %d)" % (what, point, rc))
    if not re.search(obj_pattern, note.group(1)):
        print(indent(text))
        fail("%s: the kill at %s hit %s, not %s" % (what, point, note.group(1), obj_pattern))
    h.no_ranks_left(("host1", "host2", "host3", "host4"), what)


def check_levels(args, h, root, root_latest, local_steps, what):
    committed, latest, _ = check_root(args, root, True)
    if latest != root_latest or sorted(committed) != [root_latest]:
        fail("%s: the root holds %s (latest %s), expected %s alone" % (what, sorted(committed), latest, root_latest))
    r = subprocess.run([args.cairn, "steps", root], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = r.stdout.decode(errors="replace")
    print(indent(text), flush=True)
    local = [int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s.*node-local", text, re.M)]
    if r.returncode != 0 or any(s not in local for s in local_steps):
        fail("%s: cairn steps lists node-local steps %s, expected %s among them" % (what, local, local_steps))


def resumed_from(text, step, what):
    level, at, _ = resumed_line(text)
    if level != "node-local" or at != step:
        print(indent(text))
        fail("%s resumed from %s at step %s, expected node-local step %d" % (what, level, at, step))


def verify(args, h, root, steps, reference, name):
    """Read-only resume on the 4 hosts: from the node-local level at one of `steps`."""
    _, text = h.heat2d("4x2", GRID + ["--resume", root] + levels_of(h, "xor:2"), name)
    level, step, rebuilt = resumed_line(text)
    if level != "node-local" or step not in steps:
        print(indent(text))
        fail("%s: resumed from %s at step %s, expected node-local step %s" % (name, level, step, steps))
    expect_digest(text, reference, name)
    print("  %s: node-local step %d (%d files rebuilt), digest %s" % (name, step, rebuilt, reference), flush=True)
    return step


def faults(args, h, reference):
    root = os.path.join(args.workdir, "root")
    run = GRID + EVERY + ["--flush-every", "2", "--resume", root] + levels_of(h, "xor:2")

    # 1. Rank 3 dies copying its file in the drain of step 80 (its 2nd drain).
    rc, text = h.heat2d("4x2", run, "kill-drain", fault="rank=3,point=drain.copy,after=1,action=kill",
                        expect_ok=False)
    killed(h, rc, text, "drain.copy", 2, 3, r"/step_00000080(\.cairn-staging)?/__3_0\.distcp$", "kill in a drain")
    check_levels(args, h, root, "step_00000040", [60, 80], "kill in a drain")

    # 2. Rank 5 dies in its first data write of the node-local save of step 100.
    #    That save reuses the files of step 60 (its retention drops it), so
    #    step 80 is the node-local step left; the levels record (written
    #    after a save succeeds) still lists 60.
    rc, text = h.heat2d("4x2", run, "kill-save", fault="rank=5,point=mpiio.write,after=0,action=kill",
                        expect_ok=False)
    resumed_from(text, 80, "the run after the kill in a drain")
    killed(h, rc, text, "mpiio.write", 1, 5, r"/step_00000100\.cairn-staging/__5_0\.distcp$",
           "kill in a node-local save")
    check_levels(args, h, root, "step_00000040", [80], "kill in a node-local save")
    verify(args, h, root, [80], reference, "verify-save")

    # 3. Host2's leader dies renaming its staging directory of step 100 (after
    #    the metadata's and the manifest's atomic writes).
    rc, text = h.heat2d("4x2", run, "kill-commit", fault="rank=2,point=fs.rename,after=2,action=kill",
                        expect_ok=False)
    resumed_from(text, 80, "the run after the kill in a node-local save")
    killed(h, rc, text, "fs.rename", 3, 2, r"/step_00000100\.cairn-staging$", "kill in a node-local commit")
    check_levels(args, h, root, "step_00000040", [80], "kill in a node-local commit")
    verify(args, h, root, [80, 100], reference, "verify-commit")

    # 4. Two hosts of one XOR group lost: every node-local step is skipped,
    #    naming it and both hosts; the root's step 40 loads.
    h.wipe("host1")
    h.wipe("host2")
    _, text = h.heat2d("4x2", GRID + ["--resume", root] + levels_of(h, "xor:2"), "two-lost")
    warned = re.findall(r"^cairn: warning: step (\d+) at \S+ \(node-local\) skipped: node-local step \1: (.*)$",
                        text, re.M)
    if not warned:
        print(indent(text))
        fail("two hosts lost: no warning that a node-local step is lost")
    for step, why in warned:
        if not re.search(r"XOR group 0 lost: node 0 \(host host1\), node 1 \(host host2\)", why):
            print(indent(text))
            fail("two hosts lost: the warning on step %s does not name host1 and host2: %s" % (step, why))
    steps = sorted(int(s) for s, _ in warned)
    if 80 not in steps:
        fail("two hosts lost: node-local step 80 was not reported lost (warned: %s)" % steps)
    level, step, _ = resumed_line(text)
    if step != 40 or level is None or not level.endswith("/step_00000040"):
        print(indent(text))
        fail("two hosts lost: resumed from %s at step %s, expected the root's step 40" % (level, step))
    expect_digest(text, reference, "two hosts lost")
    print("  two hosts lost: node-local steps %s skipped naming host1 and host2, root step 40, digest %s"
          % (steps, reference), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heat2d", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("--cairn", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("case", choices=["reshard", "faults"])
    ap.add_argument("redundancy", nargs="*")
    args = ap.parse_args()
    if args.case == "reshard" and not args.redundancy:
        ap.error("reshard needs at least one redundancy (partner, xor:K)")
    t0 = time.monotonic()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    h = Hosts(args)
    _, text = h.heat2d("2", GRID, "straight")  # 2 ranks on host1
    reference = digest_of(text)
    if not reference:
        fail("no digest in the straight run")
    if args.case == "reshard":
        reshard(args, h, reference, args.redundancy)
    else:
        faults(args, h, reference)
    print("PASS: %s, %.1f s" % (args.case, time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    main()

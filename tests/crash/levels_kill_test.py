#!/usr/bin/env python3
"""Kill test of the node-local level (python3 standard library only).

Round after round, starts heat2d under mpiexec with periodic checkpoints on
fake node-local storage (one node per rank, partner redundancy) that are
drained into the root after every save (--flush-every 1), and sends SIGKILL
to every process of the job once LATEST names a randomly chosen step, after a
random fraction of one checkpoint interval: kills land in node-local saves,
in drains and in their commits. Odd rounds save with --async, so that kills
also land in the background part of async node-local saves (the write,
the redundancy exchange, the commit on every node, the drain's start).
After each round:

  * cairn_check_root: the root's committed checkpoints are intact (those seen
    before unchanged or removed by retention), LATEST names a committed one,
    the rest are leftovers, and the latest root step never goes back;
  * heat2d --resume on another rank count (read only) restarts from a step at
    least as new as the root's latest and ends with the digest of a run that
    was never interrupted.

The next round resumes in the same directories; a last run goes to the end.
Uses kill_test.py's job control. The seed is printed (--seed or
CAIRN_KILL_SEED reproduce a failure).

usage: levels_kill_test.py --heat2d BIN --checker BIN --workdir DIR [options]
                           -- MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kill_test import check_root, digest_of, fail, indent, start, step_of, wait_for_step  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heat2d", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--nx", type=int, default=160)
    ap.add_argument("--ny", type=int, default=160)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=60.0)
    args, seed, rng, runner = start(ap, "levels kill test")
    grid = ["--nx", str(args.nx), "--ny", str(args.ny), "--steps", str(args.steps)]
    root = os.path.join(args.workdir, "root")
    levels = ["--local-dir", os.path.join(args.workdir, "node%n"), "--redundancy", "partner",
              "--ranks-per-node", "1"]
    t_start = time.monotonic()
    try:
        text, _ = runner.run(2, grid, os.path.join(args.workdir, "straight.log"))
        reference = digest_of(text)
        if not reference:
            fail("no digest in the straight run")
        print("reference digest %s" % reference, flush=True)

        seen, prev_latest, kills = {}, None, 0
        for rnd in range(args.rounds):
            np = rng.choice([2, 3])
            start_step = step_of(prev_latest) if prev_latest else 0
            last_target = args.steps - 4 * args.every
            target = None
            if start_step + args.every <= last_target:
                target = rng.randrange(start_step + args.every, last_target + 1, args.every)
            frac = rng.random()
            asyncly = rnd % 2 == 1
            print("round %d: %d ranks%s, %s" % (rnd, np, ", --async" if asyncly else "",
                                                "kill %.2f of an interval after LATEST reaches step %d"
                                                % (frac, target) if target is not None else "no kill"), flush=True)
            log = os.path.join(args.workdir, "round%d.log" % rnd)
            p = runner.start(np, grid + ["--checkpoint-every", str(args.every), "--flush-every", "1", "--resume",
                                         root] + levels + (["--async"] if asyncly else []), log)
            finished = not wait_for_step(p, root, target, frac, args.timeout)
            if not finished:
                runner.kill_job(p)
            runner.reap()
            text = open(log, errors="replace").read()
            print(indent("\n".join(l for l in text.splitlines()
                                   if re.match(r"(resumed|no committed|digest|heat2d: (error|fatal)|cairn: warning)",
                                               l))), flush=True)
            if finished:
                if p.returncode != 0:
                    print(indent(text))
                    fail("round %d: heat2d failed (status %d) before it was killed" % (rnd, p.returncode))
                if digest_of(text) != reference:
                    fail("round %d: the run ended with digest %s, expected %s" % (rnd, digest_of(text), reference))
            elif digest_of(text) is None:
                kills += 1

            committed, latest, _ = check_root(args, root, rng.random() < 0.5)
            for name, h in seen.items():
                if name in committed and committed[name] != h:
                    fail("round %d: committed checkpoint %s changed" % (rnd, name))
            if prev_latest is not None and (latest is None or step_of(latest) < step_of(prev_latest)):
                fail("round %d: the latest root checkpoint went back from %s to %s" % (rnd, prev_latest, latest))
            seen.update(committed)
            prev_latest = latest

            # Resumed on another rank count, read only: from a step at least
            # as new as the root's, to the straight run's digest.
            vnp = 3 if np == 2 else 2
            text, _ = runner.run(vnp, grid + ["--resume", root] + levels,
                                 os.path.join(args.workdir, "verify%d.log" % rnd))
            m = re.search(r"^resumed from .* at step (\d+) on", text, re.M)
            resumed = int(m.group(1)) if m else 0
            if latest is not None and resumed < step_of(latest):
                print(indent(text))
                fail("round %d: resumed from step %d, older than the root's %s" % (rnd, resumed, latest))
            if digest_of(text) != reference:
                print(indent(text))
                fail("round %d: resumed at step %d on %d ranks, digest %s, expected %s"
                     % (rnd, resumed, vnp, digest_of(text), reference))
            print("  verified: step %d on %d ranks -> digest %s" % (resumed, vnp, reference), flush=True)
            if finished:
                break

        if kills < 1:
            fail("no round was killed mid-run")
        text, _ = runner.run(2, grid + ["--checkpoint-every", str(args.every), "--resume", root] + levels,
                             os.path.join(args.workdir, "final.log"))
        if digest_of(text) != reference:
            fail("the final resumed run ended with digest %s, expected %s" % (digest_of(text), reference))
        check_root(args, root, True)
        print("PASS: %d killed mid-run, seed %d, %.1f s" % (kills, seed, time.monotonic() - t_start), flush=True)
    finally:
        runner.cleanup()


if __name__ == "__main__":
    main()

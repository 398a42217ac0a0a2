#!/usr/bin/env python3
"""Kill test of Cairn's crash consistency (python3 standard library only).

Repeatedly starts heat2d under mpiexec, saving through a CheckpointManager
every K steps (--checkpoint-every K --resume DIR, sometimes --async; per-rank
or container checkpoints, chosen per DIR), sends SIGKILL, at a point tied to
the job's progress (once LATEST names a randomly chosen step, after a random
fraction of one checkpoint interval, so that kills land in saves and in steps
alike on fast and slow machines), to every process of the job at once
(mpiexec and the ranks, which Open MPI puts in process groups of their own:
they are found by a tag in their environment) or to one rank (mpiexec then
ends the others), then checks with
cairn_check_root that

  * every committed checkpoint seen before is still there byte for byte (or
    was removed by retention after a newer one was committed), and the latest
    one never goes back,
  * LATEST names a committed checkpoint, latest() is the newest complete one,
  * everything else in DIR is a leftover that find_leftovers() recognises
    (some rounds also remove them with remove_leftovers()),
  * the latest checkpoint loads and is complete: heat2d --resume DIR on another
    rank count runs to the last step and ends with the digest of a run that
    was never interrupted,
  * no process of the killed job survives the round.

The next round resumes in the same DIR, so progress accumulates across kills;
when a run ends before it is killed, the next round starts a new DIR. The seed
is printed (and can be given with --seed or CAIRN_KILL_SEED) so that a failure
can be reproduced.

usage: kill_test.py --heat2d BIN --checker BIN --workdir DIR [options]
                    -- MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


class Runner:
    def __init__(self, args, mpiexec):
        self.args = args
        self.mpiexec = mpiexec
        self.tag = "cairn-kill-%d-%d" % (os.getpid(), int(time.time()))
        # Open MPI's session directory of a killed job stays behind: keep it
        # out of the shared /tmp (a short path: it holds Unix sockets).
        self.tmp = tempfile.mkdtemp(prefix="ckill")
        self.env = dict(os.environ)
        self.env["CAIRN_KILL_TEST_TAG"] = self.tag
        self.env["TMPDIR"] = self.tmp
        self.env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        self.env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        self.env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
        self.count = 0

    def command(self, np, heat2d_args):
        return [self.mpiexec[0], self.mpiexec[1], str(np)] + self.mpiexec[2:] + [self.args.heat2d] + heat2d_args

    def start(self, np, heat2d_args, log):
        cmd = self.command(np, heat2d_args)
        print("  + " + " ".join(cmd), flush=True)
        out = open(log, "wb")
        # A session (and process group) of its own, so that the whole job can be killed.
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        out.close()
        return p

    def run(self, np, heat2d_args, log, timeout=240):
        t0 = time.monotonic()
        p = self.start(np, heat2d_args, log)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_job(p)
            fail("%s did not finish in %d s" % (log, timeout))
        self.reap()
        text = open(log, errors="replace").read()
        if rc != 0:
            print(indent(text))
            fail("%s: exit status %d" % (log, rc))
        return text, time.monotonic() - t0

    def job_pids(self):
        """Processes of our jobs (they carry the tag in their environment)."""
        pids = []
        needle = ("CAIRN_KILL_TEST_TAG=" + self.tag).encode()
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % d, "rb") as f:
                    if needle in f.read().split(b"\0"):
                        pids.append(int(d))
            except OSError:
                pass
        return pids

    def rank_pids(self):
        """The heat2d processes of our jobs."""
        out = []
        for pid in self.job_pids():
            try:
                exe = os.readlink("/proc/%d/exe" % pid)
            except OSError:
                continue
            if os.path.basename(exe) == os.path.basename(self.args.heat2d):
                out.append(pid)
        return out

    def kill_job(self, p):
        """SIGKILL to every process of the job at once: the ranks (Open MPI
        puts them in process groups of their own) and mpiexec's group."""
        for pid in self.job_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fail("mpiexec (pid %d) did not die of SIGKILL" % p.pid)

    def reap(self):
        """Kills (by pid) whatever process of our jobs is still alive; True when none was."""
        survivors = self.job_pids()
        self.survivors = []
        for pid in survivors:
            try:
                self.survivors.append("%d %s" % (pid, os.path.basename(os.readlink("/proc/%d/exe" % pid))))
            except OSError:
                pass
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        while self.job_pids():
            if time.monotonic() > deadline:
                fail("processes of a killed job survive SIGKILL: %s" % self.job_pids())
            time.sleep(0.05)
        return not survivors

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def indent(text):
    return "\n".join("    | " + line for line in text.rstrip().splitlines())


def digest_of(text):
    d = None
    for line in text.splitlines():
        m = re.match(r"^digest ([0-9a-f]{16})$", line)
        if m:
            d = m.group(1)
    return d


def check_root(args, root, remove):
    cmd = [args.checker, root] + (["--remove-leftovers"] if remove else [])
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=120)
    text = r.stdout.decode(errors="replace")
    print(indent(text), flush=True)
    if r.returncode != 0 or "\nBAD " in "\n" + text:
        fail("cairn_check_root %s: status %d" % (root, r.returncode))
    committed, latest, leftovers = {}, None, []
    for line in text.splitlines():
        w = line.split()
        if w[:1] == ["committed"]:
            committed[w[1]] = w[2]
        elif w[:1] == ["latest"]:
            latest = None if w[1] == "none" else w[1]
        elif w[:1] == ["leftover"]:
            leftovers.append(w[1])
    return committed, latest, leftovers


def step_of(name):
    return int(re.match(r"step_(\d+)", name).group(1))


def latest_pointer(root):
    """The step LATEST names (replaced atomically by the manager), or -1."""
    try:
        with open(os.path.join(root, "LATEST")) as f:
            return step_of(f.read().strip())
    except (OSError, AttributeError, ValueError):
        return -1


def wait_for_step(p, root, target, frac, timeout):
    """Watches the job until LATEST names a step >= target, then until `frac`
    of the time the last checkpoint interval took has passed. True: the job
    is still running and is to be killed now; False: it ended first (or
    target is None and it ran to the end)."""
    deadline = time.monotonic() + timeout
    seen, t_seen, interval = latest_pointer(root), time.monotonic(), None
    while p.poll() is None:
        now = time.monotonic()
        if now > deadline:
            return True   # hung? kill it; the checks below say whether anything is wrong
        step = latest_pointer(root)
        if step != seen:
            if seen >= 0:
                interval = now - t_seen
            seen, t_seen = step, now
        if target is not None and seen >= target and (interval is not None or seen > target):
            pause = frac * (interval if interval is not None else 0.05)
            try:
                p.wait(timeout=pause)
                return False
            except subprocess.TimeoutExpired:
                return True
        time.sleep(0.002)  # polling LATEST, not a synchronisation
    return False


def start(ap, name):
    """Parses the command line (the mpiexec command after --), draws the
    seed (--seed, CAIRN_KILL_SEED or random; printed), makes a fresh
    --workdir. Returns (args, seed, random.Random(seed), Runner)."""
    ap.add_argument("mpiexec", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    mpiexec = [a for a in args.mpiexec if a != "--"] if args.mpiexec[:1] == ["--"] else args.mpiexec
    if len(mpiexec) < 2:
        ap.error("give MPIEXEC NUMPROC_FLAG [FLAGS...] after --")
    seed = args.seed
    if seed is None:
        seed = int(os.environ.get("CAIRN_KILL_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)
    print("%s: seed %d (rerun with --seed %d or CAIRN_KILL_SEED=%d)" % (name, seed, seed, seed), flush=True)
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    return args, seed, random.Random(seed), Runner(args, mpiexec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heat2d", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--budget", type=float, default=90.0,
                    help="seconds after which no new round starts (at least --min-rounds run)")
    ap.add_argument("--min-rounds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--nx", type=int, default=320)
    ap.add_argument("--ny", type=int, default=320)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--margin", type=int, default=6,
                    help="kills are triggered by checkpoints up to MARGIN intervals before the last step")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds a round may run before it is killed whatever its progress")
    ap.add_argument("--layouts", default="per-rank,container",
                    help="layouts to choose from, one per directory: per-rank (step_<N>/), container (step_<N>.h5)")
    args, seed, rng, runner = start(ap, "kill test")
    grid = ["--nx", str(args.nx), "--ny", str(args.ny), "--steps", str(args.steps)]
    layouts = args.layouts.split(",")
    if not layouts or any(l not in ("per-rank", "container") for l in layouts):
        ap.error("--layouts: per-rank and/or container")
    layout = []
    t_start = time.monotonic()
    try:
        # The reference: a straight run, no checkpoints.
        text, _ = runner.run(2, grid, os.path.join(args.workdir, "straight.log"))
        reference = digest_of(text)
        if not reference:
            fail("no digest in the straight run")
        print("reference digest %s" % reference, flush=True)

        campaign = 0
        root = None
        seen = {}          # committed checkpoint name -> hash, in this campaign
        prev_latest = None
        kills = 0
        rounds = 0
        for rnd in range(args.rounds):
            if rnd >= args.min_rounds and time.monotonic() - t_start > args.budget:
                print("time budget of %.0f s spent after %d rounds" % (args.budget, rnd), flush=True)
                break
            rounds += 1
            if root is None:
                campaign += 1
                root = os.path.join(args.workdir, "ckpt%d" % campaign)
                seen, prev_latest = {}, None
                layout = ["--container"] if rng.choice(layouts) == "container" else []
                print("directory %s: %s checkpoints" % (os.path.basename(root), "container" if layout else "per-rank"),
                      flush=True)
            np = rng.choice([2, 3])
            use_async = rng.random() < 0.5
            mode = rng.choice(["job", "job", "rank"])
            remove = rng.random() < 0.4
            # The kill is tied to the job's progress, not to the clock (machines
            # differ in speed): once LATEST names a step >= `target`, it comes
            # after a random fraction of the time one checkpoint interval took,
            # so that it lands anywhere in the next save or step.
            start_step = step_of(prev_latest) if prev_latest else 0
            last_target = args.steps - args.every * args.margin
            target = None
            if start_step + args.every <= last_target:
                target = rng.randrange(start_step + args.every, last_target + 1, args.every)
            frac = rng.random()
            print("round %d: %d ranks%s, %s, in %s"
                  % (rnd, np, " --async" if use_async else "",
                     ("kill %s %.2f of an interval after LATEST reaches step %d"
                      % ("the whole job" if mode == "job" else "one rank", frac, target)) if target is not None
                     else "resumed near the end: no kill", os.path.basename(root)), flush=True)
            log = os.path.join(args.workdir, "round%d.log" % rnd)
            p = runner.start(np, grid + ["--checkpoint-every", str(args.every), "--resume", root] + layout
                             + (["--async"] if use_async else []), log)
            finished = not wait_for_step(p, root, target, frac, args.timeout)
            if not finished:
                if mode == "rank":
                    ranks = runner.rank_pids()
                    if ranks:
                        victim = rng.choice(sorted(ranks))
                        try:
                            os.kill(victim, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                        try:   # mpiexec notices and ends the job
                            p.wait(timeout=20)
                        except subprocess.TimeoutExpired:
                            pass
                runner.kill_job(p)
            if not runner.reap():
                print("  processes of the job outlived the kill (%s); killed them by pid" % ", ".join(runner.survivors),
                      flush=True)
            text = text_round = open(log, errors="replace").read()
            if not finished and digest_of(text) is None:
                kills += 1
            print(indent("\n".join(l for l in text.splitlines()
                                   if re.match(r"(resumed|no committed|digest|heat2d: (error|fatal))", l))), flush=True)
            if finished:
                if p.returncode != 0:
                    print(indent(text))
                    fail("round %d: heat2d failed (status %d) before it was killed" % (rnd, p.returncode))
                if digest_of(text) != reference:
                    fail("round %d: the run ended with digest %s, expected %s" % (rnd, digest_of(text), reference))
                print("  the run ended before the kill, with the right digest", flush=True)

            committed, latest, leftovers = check_root(args, root, remove)
            for name, h in seen.items():
                if name in committed and committed[name] != h:
                    fail("round %d: committed checkpoint %s changed" % (rnd, name))
            if prev_latest is not None:
                if latest is None or step_of(latest) < step_of(prev_latest):
                    fail("round %d: the latest checkpoint went back from %s to %s" % (rnd, prev_latest, latest))
                if prev_latest not in committed and len([n for n in committed if step_of(n) > step_of(prev_latest)]) < 2:
                    fail("round %d: %s was removed although fewer than 2 newer checkpoints exist" % (rnd, prev_latest))
            seen.update(committed)
            prev_latest = latest

            # The latest checkpoint is complete: resume it on another rank
            # count to the end (read only: no checkpoints in this run).
            vnp = 3 if np == 2 else 2
            text, _ = runner.run(vnp, grid + ["--resume", root] + layout,
                                 os.path.join(args.workdir, "verify%d.log" % rnd))
            if latest is None:
                if "no committed checkpoint" not in text:
                    fail("round %d: no checkpoint, but the resumed run did not start from step 0" % rnd)
            elif ("at step %d on %d ranks" % (step_of(latest), vnp)) not in text:
                print(indent(text))
                fail("round %d: the resumed run did not start from %s" % (rnd, latest))
            if digest_of(text) != reference:
                fail("round %d: resumed from %s on %d ranks, digest %s, expected %s"
                     % (rnd, latest, vnp, digest_of(text), reference))
            print("  verified: %s on %d ranks -> digest %s" % (latest or "step 0", vnp, reference), flush=True)
            if digest_of(text_round) is not None:
                root = None   # the run got to the end: the next round starts a new directory

        if kills < min(3, rounds):
            fail("only %d of %d rounds were killed mid-run" % (kills, rounds))
        # The killed sequence, resumed without interruption, ends right too.
        if root is not None:
            text, _ = runner.run(rng.choice([1, 2, 3]), grid + ["--checkpoint-every", str(args.every), "--resume",
                                                                root] + layout,
                                 os.path.join(args.workdir, "final.log"))
            if digest_of(text) != reference:
                fail("the final resumed run ended with digest %s, expected %s" % (digest_of(text), reference))
            check_root(args, root, True)
        print("PASS: %d rounds, %d killed mid-run, seed %d, %.1f s"
              % (rounds, kills, seed, time.monotonic() - t_start), flush=True)
    finally:
        runner.reap()
        runner.cleanup()


if __name__ == "__main__":
    main()

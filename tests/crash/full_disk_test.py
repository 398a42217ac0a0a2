#!/usr/bin/env python3
"""Full-disk test of Cairn's saves (python3 standard library only).

Runs heat2d, saving through a CheckpointManager every few steps, on a real
small file system (a tmpfs of --fs-kib KiB mounted in a private mount
namespace) that a filler file has partly used, so that some save of the run
finds the disk full: in its data files, in a container's collective writes,
in the metadata file or in the container's commit. For each run it checks

  * the job ends within --timeout seconds (no hang: a collective HDF5 call
    left waiting by a rank that failed),
  * it exits with 0 or with heat2d's error status 1, never a signal (no crash
    at exit after a failed HDF5 close),
  * a failure is one clean error that names the full disk,
  * the root holds only complete checkpoints, LATEST and recognised
    leftovers (cairn_check_root), and its latest checkpoint verifies
    (`cairn verify`).

Layouts: per-rank files, a container, and a container whose space cannot be
reserved (CAIRN_FAULT makes fallocate report EOPNOTSUPP, as on a file system
without it), so that the collective writes themselves hit the full disk.

Rounds run --jobs at a time (default 2), each on a tmpfs of its own.

Needs root (mount) and unshare(1); without them it prints the reason and
exits 77 (CTest: skipped).

usage: full_disk_test.py --heat2d BIN --checker BIN --cairn BIN --workdir DIR
                         [--rounds N] [--seed S] [--jobs J] -- MPIEXEC NUMPROC_FLAG [FLAGS...]
"""

import argparse
import concurrent.futures
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

SKIP = 77


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


class RoundFailure(Exception):
    """A round's failure, reported after the rounds running with it end."""


def skip(msg):
    print("SKIP: " + msg, flush=True)
    sys.exit(SKIP)


def enter_namespace(argv):
    """Re-runs this script in a private mount namespace (unshare -m)."""
    if os.geteuid() != 0:
        skip("needs root to mount a small file system")
    unshare = shutil.which("unshare")
    if unshare is None:
        skip("unshare(1) not found")
    cmd = [unshare, "--mount", "--propagation", "private", sys.executable, os.path.abspath(__file__), "--inside"]
    rc = subprocess.call(cmd + argv)
    if rc == SKIP:
        sys.exit(SKIP)
    if rc != 0 and rc != 1:
        # unshare itself refused (no CAP_SYS_ADMIN in a container, say)
        probe = subprocess.run([unshare, "--mount", "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            skip("cannot create a mount namespace: " + probe.stderr.strip())
    sys.exit(rc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inside", action="store_true")
    ap.add_argument("--heat2d", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("--cairn", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--fs-kib", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("CAIRN_FULL_DISK_ROUNDS", "8")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("CAIRN_FULL_DISK_SEED", "0")) or None)
    ap.add_argument("--timeout", type=float, default=90.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("mpiexec", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    mpiexec = [a for a in args.mpiexec if a != "--"]
    if len(mpiexec) < 2:
        fail("give the MPI launcher after --: MPIEXEC NUMPROC_FLAG [FLAGS...]")
    if not args.inside:
        enter_namespace(sys.argv[1:])

    os.makedirs(args.workdir, exist_ok=True)
    jobs = max(1, args.jobs)
    mounts = queue.Queue()  # one tmpfs per round running at a time
    for k in range(jobs):
        mnt = os.path.join(os.path.abspath(args.workdir), "fs%d" % k)
        os.makedirs(mnt, exist_ok=True)
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dk" % args.fs_kib, "cairn-full-disk", mnt],
                           capture_output=True, text=True)
        if m.returncode != 0:
            skip("cannot mount a tmpfs: " + m.stderr.strip())
        mounts.put(mnt)

    seed = args.seed if args.seed is not None else random.randrange(1, 1 << 30)
    print("seed %d (CAIRN_FULL_DISK_SEED=%d reruns these rounds)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.pop("CAIRN_FAULT", None)
    layouts = ["per-rank", "container", "container-unreserved"]
    fs_bytes = args.fs_kib * 1024
    failures_seen = {l: 0 for l in layouts}
    lock = threading.Lock()
    started = time.time()
    # First, fixed rounds: one per-rank save whose data files fit exactly
    # and whose metadata.h5 does not (2 ranks, 128 x 128: two files of
    # 64 KiB, 4 KiB to spare), once synchronous, once with --async.
    plans = [("per-rank", 2, 128, fs_bytes - 2 * 65536 - 4096, a, 5) for a in (False, True)]
    for r in range(args.rounds * len(layouts)):
        layout = layouts[r % len(layouts)]
        np = rng.choice([2, 3])
        # 128-240 cells a side: 128-460 KiB a checkpoint. The manager keeps
        # two and writes a third; the filler leaves room for 0.6-3.2 of them,
        # so that the disk fills in any save of the run and at any point.
        n = rng.randrange(128, 241)
        room = int(n * n * 8 * rng.uniform(0.6, 3.2))
        asynchronous = rng.random() < 0.3 and layout != "container-unreserved"
        plans.append((layout, np, n, max(0, fs_bytes - room), asynchronous, 30))

    def run_round(r, layout, np, n, filler, asynchronous, steps):
        mnt = mounts.get()
        try:
            one_round(mnt, r, layout, np, n, filler, asynchronous, steps)
        finally:
            mounts.put(mnt)

    def one_round(mnt, r, layout, np, n, filler, asynchronous, steps):
        for name in os.listdir(mnt):
            p = os.path.join(mnt, name)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
        with open(os.path.join(mnt, "filler"), "wb") as f:
            f.write(b"\0" * filler)
        root = os.path.join(mnt, "root")
        cmd = [mpiexec[0], mpiexec[1], str(np)] + mpiexec[2:] + [
            args.heat2d, "--nx", str(n), "--ny", str(n), "--steps", str(steps), "--checkpoint-every", "5",
            "--checkpoint-dir", root]
        if layout != "per-rank":
            cmd.append("--container")
        if asynchronous:
            cmd.append("--async")
        run_env = dict(env)
        if layout == "container-unreserved":
            run_env["CAIRN_FAULT"] = "point=fs.reserve,times=0,errno=EOPNOTSUPP"
        what = "round %d: %s, %d ranks, %dx%d, filler %d KiB%s" % (
            r, layout, np, n, n, filler // 1024, ", async" if asynchronous else "")
        t0 = time.time()
        # A session of its own: a hung job is killed whole (mpiexec and ranks).
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=run_env,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            raise RoundFailure("%s: hung (no end within %.0f s); output:\n%s"
                               % (what, args.timeout, out[-3000:]))
        dt = time.time() - t0
        errors = [l for l in out.splitlines() if "heat2d: error:" in l]
        status = "ok" if p.returncode == 0 else "error"
        print("%s: exit %d in %.1f s%s" % (what, p.returncode, dt, (": " + errors[0][:200]) if errors else ""),
              flush=True)
        if p.returncode not in (0, 1):
            raise RoundFailure("%s: exit status %d (a crash?); output:\n%s" % (what, p.returncode, out[-3000:]))
        if p.returncode == 1:
            with lock:
                failures_seen[layout] += 1
            if not errors:
                raise RoundFailure("%s: failed without heat2d's error line; output:\n%s" % (what, out[-3000:]))
            if not any(k in errors[0] for k in ("No space left on device", "cannot reserve")):
                raise RoundFailure("%s: the error does not name the full disk: %s" % (what, errors[0]))
        if r < 2 and (p.returncode != 1 or "metadata" not in errors[0]):
            raise RoundFailure("%s: expected the save to fail writing metadata.h5 (its data files fit, it does not)"
                               % what)
        chk = subprocess.run([args.checker, root], capture_output=True, text=True, env=env)
        if chk.returncode != 0:
            raise RoundFailure("%s: cairn_check_root found a damaged root:\n%s%s" % (what, chk.stdout, chk.stderr))
        latest = [l.split()[1] for l in chk.stdout.splitlines() if l.startswith("latest ")]
        if latest and latest[0] != "none":
            v = subprocess.run([args.cairn, "verify", os.path.join(root, latest[0])], capture_output=True,
                               text=True, env=env)
            if v.returncode != 0:
                raise RoundFailure("%s: the latest checkpoint %s does not verify:\n%s%s"
                                   % (what, latest[0], v.stdout, v.stderr))
        elif status == "ok":
            raise RoundFailure("%s: the run succeeded but left no checkpoint" % what)

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        rounds = [pool.submit(run_round, r, *plan) for r, plan in enumerate(plans)]
        for f in rounds:
            try:
                f.result()
            except RoundFailure as e:
                failed.append(str(e))
    while not mounts.empty():
        subprocess.run(["umount", mounts.get()])
    for msg in failed:
        print("FAIL: " + msg, flush=True)
    if failed:
        sys.exit(1)
    print("%d rounds in %.0f s; failed saves seen: %s" % (len(plans), time.time() - started,
                                                       ", ".join("%s %d" % kv for kv in failures_seen.items())))
    if sum(failures_seen.values()) == 0:
        fail("no round filled the disk: the test tested nothing")
    print("full-disk test passed")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks the CTest registration of the MPI suite (tests/CMakeLists.txt).

The test cases of build/tests/cairn_mpi_tests run as one CTest test per
source file and rank count (mpi.<file>.np<n>). This checks that, at each
rank count, the registered tests together run every test case the binary
selects by default (all but the hidden ones) exactly once: no case left
out, none run twice, no test that selects nothing.

    scripts/check_mpi_tests.py [build-dir]      (default: build)

Exit status 0 when the registration is complete, 1 otherwise.
"""
import collections
import json
import os
import subprocess
import sys


def list_cases(binary, args):
    """The test case names the binary selects with `args` (one process, no mpiexec)."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run([binary, "--list-test-names-only", *args], check=False, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    show = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                          stdout=subprocess.PIPE, text=True)
    tests = json.loads(show.stdout)["tests"]
    binary = None
    per_np = collections.defaultdict(list)  # np -> [(test name, args)]
    for t in tests:
        cmd = t.get("command") or []
        exe = next((i for i, c in enumerate(cmd) if os.path.basename(c) == "cairn_mpi_tests"), None)
        if exe is None or not t["name"].startswith("mpi."):
            continue
        binary = cmd[exe]
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        per_np[int(props.get("PROCESSORS", 1))].append((t["name"], cmd[exe + 1:]))
    if binary is None:
        print("no mpi.* tests of cairn_mpi_tests registered in " + build)
        return 1
    everything = collections.Counter(list_cases(binary, []))
    ok = True
    for np in sorted(per_np):
        got = collections.Counter()
        for name, args in per_np[np]:
            cases = list_cases(binary, args)
            if not cases:
                print(f"{name}: selects no test case ({' '.join(args)})")
                ok = False
            got.update(cases)
        missing = everything - got
        twice = [c for c, n in got.items() if n > 1]
        extra = got - everything
        for c in sorted(missing):
            print(f"np{np}: '{c}' is run by none of the {len(per_np[np])} tests")
        for c in sorted(twice):
            print(f"np{np}: '{c}' is run {got[c]} times")
        for c in sorted(extra):
            print(f"np{np}: '{c}' is not a default test case (hidden?)")
        ok = ok and not missing and not twice and not extra
        print(f"np{np}: {len(per_np[np])} tests, {sum(got.values())} test cases, "
              f"default selection {sum(everything.values())}: {'same' if got == everything else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

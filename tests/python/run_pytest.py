"""Runs one pytest file, or exits 77 (skipped, reason printed) when pytest,
numpy or (with --mpi) mpi4py cannot be imported. Under mpiexec every rank
runs the same tests; a failure on any rank fails the job."""
import sys

mpi = "--mpi" in sys.argv
args = [a for a in sys.argv[1:] if a != "--mpi"]
for module in ["pytest", "numpy"] + (["mpi4py"] if mpi else []):
    try:
        __import__(module)
    except ImportError:
        print(f"SKIP: {sys.executable} cannot import {module} (Debian: python3-{module})")
        sys.exit(77)
import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "--color=no", "-p", "no:cacheprovider", *args]))

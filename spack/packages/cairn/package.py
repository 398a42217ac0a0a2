# Spack recipe of Cairn. See DEVELOPERS.md at the root of the Cairn
# repository for how to try it.

import os

try:  # Spack 1.x: build systems live in the builtin package repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
except ImportError:  # Spack 0.x: spack.package exports them
    pass

from spack.package import *

# This file is <cairn checkout>/spack/packages/cairn/package.py.
_CHECKOUT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class Cairn(CMakePackage):
    """Distributed checkpoint/restart for MPI simulation codes, after PyTorch
    Distributed Checkpoint: collective save and load of the sharded N-d
    arrays, scalars and objects of a state dict, with N -> M resharding;
    data in per-rank files written with MPI-IO, metadata in HDF5."""

    # Cairn has no public home page, git server or release tarballs yet. The
    # git source is the Cairn checkout that holds this recipe (its committed
    # branches, not the working tree); CAIRN_GIT overrides it with any git
    # URL. The 0.1.0 tarball is one made locally with `git archive`, at
    # CAIRN_URL (default file:///tmp/cairn-0.1.0.tar.gz).
    homepage = "file://" + _CHECKOUT
    git = os.environ.get("CAIRN_GIT", "file://" + _CHECKOUT)
    url = os.environ.get("CAIRN_URL", "file:///tmp/cairn-0.1.0.tar.gz")

    version("main", branch="main")
    # No published tarball, hence no checksum: install with --no-checksum.
    version("0.1.0")

    # One variant per CMake option of Cairn. Cairn's ON/OFF/AUTO options are
    # always set to ON or OFF here, so that a build never depends on what
    # happens to be installed on the machine.
    variant("shared", default=True, description="Build a shared libcairn (BUILD_SHARED_LIBS)")
    variant("examples", default=True, description="Build the examples (CAIRN_BUILD_EXAMPLES)")
    variant("fortran", default=False, description="Build the Fortran module (CAIRN_USE_FORTRAN)")
    variant("kokkos", default=False, description="Kokkos::View adapter cairn/kokkos.hpp (CAIRN_USE_KOKKOS)")
    variant("cuda", default=False, description="Stage CUDA device memory (CAIRN_USE_CUDA)")
    variant("tools", default=True, description="The cairn command-line tool (CAIRN_BUILD_TOOLS)")
    variant("python", default=False, description="The cairn Python package (CAIRN_BUILD_PYTHON)")
    # Off by default, unlike in CMake: the driver is for developers measuring
    # Cairn (docs/BENCHMARKS.md), and it is not installed.
    variant("benchmarks", default=False, description="Build the benchmark driver bench/ (CAIRN_BUILD_BENCHMARKS)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("cmake@3.20:", type="build")

    depends_on("mpi@3:")
    depends_on("hdf5@1.10:+mpi")
    depends_on("xxhash")  # XXH3 checksums of stored data
    depends_on("kokkos", when="+kokkos")
    depends_on("cuda", when="+cuda")
    # A Kokkos with its CUDA backend puts views in CUDA device memory by
    # default (Kokkos::CudaSpace), which only a Cairn built +cuda can stage:
    # without it every save and load of such a view fails at run time.
    conflicts(
        "~cuda",
        when="+kokkos ^kokkos+cuda",
        msg="Kokkos with CUDA keeps views in device memory: build cairn +cuda to stage them",
    )
    depends_on("cli11@2:", type="build", when="+tools")  # header-only
    depends_on("nlohmann-json@3:", type="build")  # header-only: the profile records and the tool's JSON

    # The Python package: a pybind11 module over libcairn; mpi4py of the
    # same MPI for its parallel save and load (docs/PYTHON.md).
    extends("python", when="+python")
    depends_on("python@3.8:", type=("build", "run"), when="+python")
    depends_on("py-pybind11@2.10:", type="build", when="+python")
    depends_on("py-numpy", type=("build", "run"), when="+python")
    depends_on("py-mpi4py", type="run", when="+python")
    depends_on("py-pytest", type="test", when="+python")

    depends_on("catch2@2", type="test")
    depends_on("pkgconfig", type="test")  # the install test builds through cairn.pc too

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define_from_variant("CAIRN_BUILD_EXAMPLES", "examples"),
            self.define_from_variant("CAIRN_USE_FORTRAN", "fortran"),
            self.define_from_variant("CAIRN_USE_KOKKOS", "kokkos"),
            self.define_from_variant("CAIRN_USE_CUDA", "cuda"),
            self.define_from_variant("CAIRN_BUILD_TOOLS", "tools"),
            self.define_from_variant("CAIRN_BUILD_BENCHMARKS", "benchmarks"),
            self.define_from_variant("CAIRN_BUILD_PYTHON", "python"),
            self.define("BUILD_TESTING", self.run_tests),
            # The MPI and the HDF5 of the spec, not the first ones on the path.
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPIEXEC_EXECUTABLE", join_path(spec["mpi"].prefix.bin, "mpiexec")),
            self.define("HDF5_ROOT", spec["hdf5"].prefix),
        ]
        if spec.satisfies("+fortran"):
            # Cairn refuses an MPI for Fortran other than its MPI for C.
            args.append(self.define("MPI_Fortran_COMPILER", spec["mpi"].mpifc))
        if spec.satisfies("+python"):
            # The interpreter of the extended python (in Spack 1.x that of
            # its python-venv), and that python's platlib under the prefix
            # (lib/pythonX.Y/site-packages), where `spack load` and views
            # look, whatever the interpreter's default install scheme
            # (Debian's python3: local/lib/python3.Y/dist-packages).
            args.extend([
                self.define("Python3_EXECUTABLE", spec["python"].command.path),
                self.define("CAIRN_PYTHON_INSTALL_DIR", python_platlib),
            ])
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CUDA_COMPILER", join_path(spec["cuda"].prefix.bin, "nvcc")))
        return args

    def setup_build_environment(self, env):
        # Open MPI's mpiexec refuses to run as root unless these are set, and
        # Spack removes every variable ending in _ROOT from the build
        # environment: set them for the tests of `spack install --test=root`
        # run as root (containers, CI).
        if self.run_tests and os.geteuid() == 0 and self.spec.satisfies("^openmpi"):
            env.set("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

    def check(self):
        """Runs Cairn's test suite (unit, MPI at 1-4 ranks, examples, install
        test) after the build."""
        with working_dir(self.build_directory):
            ctest("--output-on-failure", "-j", str(make_jobs))

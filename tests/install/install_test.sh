#!/usr/bin/env bash
# Install test of Cairn: what a user of an installed Cairn does.
#
#  1. cmake --install BUILD_DIR --prefix WORK_DIR/prefix; the installed
#     `cairn` tool (where built) runs without LD_LIBRARY_PATH (with
#     --relocatable-rpath=OFF, a packager's run path: with this prefix's
#     libdir in LD_LIBRARY_PATH);
#  2. configure, build and run (mpiexec, 2 ranks) downstream/ with
#     find_package(Cairn REQUIRED) and CMAKE_PREFIX_PATH=WORK_DIR/prefix;
#     check that it found the Cairn just installed and that it prints
#     "downstream: OK <version>"; with --no-kokkos (the project does not use
#     Cairn::kokkos), that nothing about Kokkos is in its configure output or
#     its cache. With --old-project=DIR (downstream_old/) the same with a
#     project of cmake_minimum_required(VERSION 3.0) that finds MPI itself
#     (through --mpicxx=MPICXX, Cairn's MPI's C++ wrapper, where given);
#  3. compile downstream/main.cpp with CXX $(pkg-config --cflags --libs cairn)
#     (PKG_CONFIG_PATH=WORK_DIR/prefix/LIBDIR/pkgconfig) and run it the same
#     way without LD_LIBRARY_PATH (cairn.pc's rpath), and with --c-project
#     and --cc the C program of step 4 with CC (and with --mpicc=MPICC with
#     MPICC); check that cairn.pc names no library file of the build machine.
#     With --fmake-project=DIR (downstream_fmake/), --mpifc=MPIFC and
#     --make=MAKE (Cairn was built with its Fortran module): check
#     cairn-fortran.pc (the module directory in --cflags, the rpath variable)
#     and build DIR's Fortran program with MAKE out of tree, with MPIFC
#     $(pkg-config --cflags cairn-fortran) ... $(pkg-config --libs
#     cairn-fortran), and run it the same way without LD_LIBRARY_PATH.
#     Skipped, with a message, when --pkg-config is empty;
#  4. with --c-project=DIR (downstream_cf/) and --cc=CC: configure, build and
#     run its C program the same way, and with --fc=FC (Cairn was built with
#     its Fortran module) its Fortran program too: CairnConfig.cmake's paths
#     for projects that find MPI for C and for Fortran;
#  5. with --other-mpi-project=DIR (other_mpi/), configure that project,
#     which uses another MPI than Cairn's, and check that find_package(Cairn)
#     refuses it with a message naming both: once as a project that found MPI
#     itself at a path that is not Cairn's, and, with --other-mpi-cxx=WRAPPER
#     (a second MPI installed, e.g. Debian's MPICH beside Open MPI), once
#     through FindMPI.
#
# usage: install_test.sh --build-dir=DIR --work-dir=DIR --downstream=DIR
#          --libdir=LIBDIR --version=X.Y.Z --cmake=CMAKE --cxx=CXX
#          [--relocatable-rpath=ON|OFF] [--config=CFG] [--generator=GEN] [--pkg-config=PKG_CONFIG]
#          [--old-project=DIR [--mpicxx=MPICXX]] [--no-kokkos]
#          [--c-project=DIR --cc=CC [--fc=FC] [--mpicc=MPICC]]
#          [--fmake-project=DIR --mpifc=MPIFC --make=MAKE]
#          [--other-mpi-project=DIR [--other-mpi-cxx=WRAPPER]]
#          --mpiexec MPIEXEC NUMPROC_FLAG [MPIEXEC_FLAGS...]   (last)
# WORK_DIR is emptied first; give each build its own (ctest does).
set -euo pipefail

fail() {
    echo "install_test: FAIL: $*"
    exit 1
}

build_dir="" work_dir="" downstream="" libdir="" version="" cmake="" cxx=""
config="" generator="" pkg_config="" other_mpi_project="" other_mpi_cxx="" c_project="" cc="" fc="" mpiexec=()
old_project="" no_kokkos=OFF mpicc="" mpicxx="" fmake_project="" mpifc="" make=""
relocatable_rpath=ON
while [ "$#" -gt 0 ]; do
    case $1 in
        --build-dir=*) build_dir=${1#*=} ;;
        --work-dir=*) work_dir=${1#*=} ;;
        --downstream=*) downstream=${1#*=} ;;
        --libdir=*) libdir=${1#*=} ;;
        --version=*) version=${1#*=} ;;
        --relocatable-rpath=*) relocatable_rpath=${1#*=} ;;
        --cmake=*) cmake=${1#*=} ;;
        --cxx=*) cxx=${1#*=} ;;
        --config=*) config=${1#*=} ;;
        --generator=*) generator=${1#*=} ;;
        --pkg-config=*) pkg_config=${1#*=} ;;
        --other-mpi-project=*) other_mpi_project=${1#*=} ;;
        --c-project=*) c_project=${1#*=} ;;
        --old-project=*) old_project=${1#*=} ;;
        --no-kokkos) no_kokkos=ON ;;
        --cc=*) cc=${1#*=} ;;
        --mpicc=*) mpicc=${1#*=} ;;
        --mpicxx=*) mpicxx=${1#*=} ;;
        --fc=*) fc=${1#*=} ;;
        --fmake-project=*) fmake_project=${1#*=} ;;
        --mpifc=*) mpifc=${1#*=} ;;
        --make=*) make=${1#*=} ;;
        --other-mpi-cxx=*) other_mpi_cxx=${1#*=} ;;
        --mpiexec) shift; mpiexec=("$@"); break ;;
        *) sed -n '2,47p' "$0" >&2; fail "unknown argument '$1'" ;;
    esac
    shift
done
for v in build_dir work_dir downstream libdir version cmake cxx; do
    [ -n "${!v}" ] || fail "missing --${v//_/-}"
done
[ "${#mpiexec[@]}" -ge 2 ] || fail "missing --mpiexec MPIEXEC NUMPROC_FLAG"

prefix=$work_dir/prefix
rm -rf "$work_dir"
mkdir -p "$work_dir"

# run_checked NAME CMD...: runs CMD, shows its output indented, fails on a
# non-zero exit status.
run_checked() {
    local name=$1
    shift
    echo "+ $*"
    local rc=0
    "$@" >"$work_dir/$name.log" 2>&1 || rc=$?
    sed 's/^/  | /' "$work_dir/$name.log"
    [ "$rc" -eq 0 ] || fail "$name exited with status $rc"
}

# run_downstream NAME EXE [ENV_COMMAND...]: runs EXE on 2 ranks (mpiexec
# run by ENV_COMMAND, e.g. env -u LD_LIBRARY_PATH) and checks its OK line.
run_downstream() {
    local name=$1 exe=$2
    run_checked "$name" "${@:3}" "${mpiexec[0]}" "${mpiexec[1]}" 2 "${mpiexec[@]:2}" "$exe" "$work_dir/ckpt-$name"
    grep -qx "downstream: OK $version on 2 ranks" "$work_dir/$name.log" ||
        fail "$name did not print 'downstream: OK $version on 2 ranks'"
    [ -f "$work_dir/ckpt-$name/metadata.h5" ] || fail "$name left no committed checkpoint"
}

# configure_args SOURCE_DIR BUILD_NAME [CMAKE_ARGS...]: sets cfg to the
# arguments that configure SOURCE_DIR into WORK_DIR/BUILD_NAME against the
# installed prefix, with the build's generator and configuration.
configure_args() {
    cfg=(-S "$1" -B "$work_dir/$2" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "${@:3}")
    [ -z "$generator" ] || cfg+=(-G "$generator")
    [ -z "$config" ] || cfg+=(-DCMAKE_BUILD_TYPE="$config")
}

# build_and_find BUILD_NAME PROGRAM: builds WORK_DIR/BUILD_NAME and sets exe
# to the PROGRAM it made.
build_and_find() {
    local args=(--build "$work_dir/$1")
    [ -z "$config" ] || args+=(--config "$config")
    run_checked "$1.build" "$cmake" "${args[@]}"
    exe=$(find "$work_dir/$1" -type f -name "$2" -perm -u+x | head -n 1)
    [ -n "$exe" ] || fail "the build in $1 made no $2"
}

# expect_refused NAME MESSAGE CMAKE_ARGS...: configuring must fail, and the
# output (lines joined: CMake wraps messages) must hold MESSAGE.
expect_refused() {
    local name=$1 message=$2 rc=0
    shift 2
    echo "+ $cmake $*"
    "$cmake" "$@" >"$work_dir/$name.log" 2>&1 || rc=$?
    sed 's/^/  | /' "$work_dir/$name.log"
    [ "$rc" -ne 0 ] || fail "$name: configured; expected a refusal: $message"
    tr -s ' \n' ' ' <"$work_dir/$name.log" | grep -qF "$message" ||
        fail "$name: configure failed without the message: $message"
}

# ---- 1. install -------------------------------------------------------------
install_args=(--install "$build_dir" --prefix "$prefix")
[ -z "$config" ] || install_args+=(--config "$config")
run_checked install "$cmake" "${install_args[@]}"
[ -f "$prefix/$libdir/cmake/Cairn/CairnConfig.cmake" ] || fail "no CairnConfig.cmake in $prefix/$libdir/cmake/Cairn"
[ -f "$prefix/$libdir/pkgconfig/cairn.pc" ] || fail "no cairn.pc in $prefix/$libdir/pkgconfig"

# The installed tool runs without LD_LIBRARY_PATH: its rpath finds libcairn in
# the prefix, libcairn's the HDF5 and MPI it was linked with. Where the
# packager set the run path (CMAKE_INSTALL_RPATH, e.g. Spack: its final
# prefix, not this one), the tool is run with this prefix's libdir instead.
if [ -x "$prefix/bin/cairn" ]; then
    if [ "$relocatable_rpath" = ON ]; then
        run_checked tool-version env -u LD_LIBRARY_PATH "$prefix/bin/cairn" --version
    else
        echo "install_test: the run path is the packager's (CMAKE_INSTALL_RPATH): the tool runs with LD_LIBRARY_PATH here"
        run_checked tool-version env LD_LIBRARY_PATH="$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$prefix/bin/cairn" --version
    fi
    grep -q "$version" "$work_dir/tool-version.log" || fail "the installed cairn tool did not print $version"
fi

# ---- 2. find_package(Cairn) ---------------------------------------------------
configure_args "$downstream" build-cmake -DCMAKE_CXX_COMPILER="$cxx"
run_checked configure "$cmake" "${cfg[@]}"
found_dir=$(sed -n 's/^Cairn_DIR:PATH=//p' "$work_dir/build-cmake/CMakeCache.txt")
case $found_dir in
    "$prefix"/*) ;;
    *) fail "the downstream project found Cairn in '$found_dir', not under $prefix" ;;
esac
build_and_find build-cmake downstream
run_downstream run-cmake "$exe"

# check_no_kokkos BUILD_NAME LOG: a project that does not ask for Cairn's Kokkos
# adapter does not look for Kokkos: nothing about Kokkos in its configure
# output or its cache (Debian's Kokkos config would force
# CMAKE_CXX_EXTENSIONS=OFF into it).
check_no_kokkos() {
    [ "$no_kokkos" = ON ] || return 0
    ! grep -i kokkos "$work_dir/$2.log" || fail "$1: find_package(Cairn) looked for Kokkos unasked"
    ! grep -iE '^(CMAKE_CXX_EXTENSIONS|Kokkos_DIR|CAIRN_KOKKOS_[A-Z_]*)[:=]' "$work_dir/$1/CMakeCache.txt" ||
        fail "$1: find_package(Cairn) put Kokkos' settings into the project's cache"
}
check_no_kokkos build-cmake configure

# The same program in a project with cmake_minimum_required(VERSION 3.0):
# Cairn's package files set their own policies.
if [ -n "$old_project" ]; then
    configure_args "$old_project" build-old -DCMAKE_CXX_COMPILER="$cxx" ${mpicxx:+"-DMPI_CXX_COMPILER=$mpicxx"}
    run_checked configure-old "$cmake" "${cfg[@]}"
    check_no_kokkos build-old configure-old
    build_and_find build-old downstream_old
    run_downstream run-old "$exe"
fi

# ---- 3. pkg-config -------------------------------------------------------------
if [ -z "$pkg_config" ]; then
    echo "install_test: pkg-config not found: skipping the pkg-config build"
else
    export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    pc_version=$("$pkg_config" --modversion cairn) || fail "pkg-config does not know cairn"
    [ "$pc_version" = "$version" ] || fail "pkg-config says cairn $pc_version, expected $version"
    pc_libdir=$("$pkg_config" --variable=libdir cairn)
    [ "$(cd "$pc_libdir" && pwd -P)" = "$(cd "$prefix/$libdir" && pwd -P)" ] ||
        fail "cairn.pc's libdir '$pc_libdir' is not $prefix/$libdir"
    # No file of the build machine: MPI through its own module (Requires) or
    # -L/-l flags, and no libdl.a (glibc's is empty since 2.34).
    ! grep -E '^Libs(\.private)?:.*[^ ]\.(a|so)( |$)' "$prefix/$libdir/pkgconfig/cairn.pc" ||
        fail "cairn.pc names library files of the build machine"
    read -r -a pc_flags <<<"$("$pkg_config" --cflags --libs cairn)"
    echo "pkg-config --cflags --libs cairn: ${pc_flags[*]}"
    read -r -a pc_no_rpath <<<"$("$pkg_config" --define-variable=rpath= --libs cairn)"
    case " ${pc_no_rpath[*]} " in
        *" -Wl,-rpath,"*) fail "pkg-config --define-variable=rpath= --libs cairn kept the rpath" ;;
    esac
    # The prefix is not on the loader's path: cairn.pc's rpath finds its
    # libcairn, with LD_LIBRARY_PATH unset.
    run_checked compile-pc "$cxx" -std=c++17 "$downstream/main.cpp" -o "$work_dir/downstream-pc" "${pc_flags[@]}"
    run_downstream run-pc "$work_dir/downstream-pc" env -u LD_LIBRARY_PATH
    if [ -n "$c_project" ] && [ -n "$cc" ]; then
        # The C program the same way, with the C compiler, and with the MPI
        # C wrapper (mpicc), as a C code's makefile does.
        run_checked compile-pc-c "$cc" "$c_project/main.c" -o "$work_dir/downstream-pc-c" "${pc_flags[@]}"
        run_downstream run-pc-c "$work_dir/downstream-pc-c" env -u LD_LIBRARY_PATH
        if [ -n "$mpicc" ]; then
            run_checked compile-pc-mpicc "$mpicc" "$c_project/main.c" -o "$work_dir/downstream-pc-mpicc" "${pc_flags[@]}"
            run_downstream run-pc-mpicc "$work_dir/downstream-pc-mpicc" env -u LD_LIBRARY_PATH
        fi
    fi
    # A Fortran code's Makefile: cairn-fortran.pc gives the module directory,
    # -lcairn_fortran and, through cairn.pc, the rest.
    if [ -n "$fmake_project" ] && [ -n "$mpifc" ]; then
        [ -n "$make" ] || fail "--fmake-project needs --make"
        [ -f "$prefix/$libdir/pkgconfig/cairn-fortran.pc" ] || fail "no cairn-fortran.pc in $prefix/$libdir/pkgconfig"
        fpc_version=$("$pkg_config" --modversion cairn-fortran) || fail "pkg-config does not know cairn-fortran"
        [ "$fpc_version" = "$version" ] || fail "pkg-config says cairn-fortran $fpc_version, expected $version"
        fmoddir=$("$pkg_config" --variable=fmoddir cairn-fortran)
        [ -f "$fmoddir/cairn.mod" ] || fail "cairn-fortran.pc's fmoddir '$fmoddir' holds no cairn.mod"
        read -r -a fpc_cflags <<<"$("$pkg_config" --cflags cairn-fortran)"
        echo "pkg-config --cflags cairn-fortran: ${fpc_cflags[*]}"
        case " ${fpc_cflags[*]} " in
            *" -I$fmoddir "*) ;;
            *) fail "pkg-config --cflags cairn-fortran lacks -I$fmoddir" ;;
        esac
        read -r -a fpc_libs <<<"$("$pkg_config" --libs cairn-fortran)"
        echo "pkg-config --libs cairn-fortran: ${fpc_libs[*]}"
        case " ${fpc_libs[*]} " in
            *" -lcairn_fortran "*" -lcairn "*) ;;
            *) fail "pkg-config --libs cairn-fortran lacks -lcairn_fortran ... -lcairn" ;;
        esac
        read -r -a fpc_no_rpath <<<"$("$pkg_config" --define-variable=rpath= --libs cairn-fortran)"
        case " ${fpc_no_rpath[*]} " in
            *" -Wl,-rpath,"*) fail "pkg-config --define-variable=rpath= --libs cairn-fortran kept the rpath" ;;
        esac
        mkdir -p "$work_dir/build-make"
        run_checked build-make "$make" -C "$work_dir/build-make" -f "$fmake_project/Makefile" \
            SRCDIR="$fmake_project" MPIFC="$mpifc" PKG_CONFIG="$pkg_config"
        [ -x "$work_dir/build-make/downstream_fmake" ] || fail "make built no downstream_fmake"
        run_downstream run-make "$work_dir/build-make/downstream_fmake" env -u LD_LIBRARY_PATH
    fi
fi

# ---- 4. C and Fortran ----------------------------------------------------------
if [ -n "$c_project" ]; then
    [ -n "$cc" ] || fail "--c-project needs --cc"
    cf_extra=(-DCMAKE_C_COMPILER="$cc")
    [ -z "$fc" ] || cf_extra+=(-DWITH_FORTRAN=ON -DCMAKE_Fortran_COMPILER="$fc")
    if [ -f "$prefix/$libdir/libcairn.a" ]; then
        # A static libcairn: refused to a project without CXX, by name.
        configure_args "$c_project" build-cf-no-cxx "${cf_extra[@]}"
        expect_refused configure-cf-no-cxx "Cairn is a static C++ library here" "${cfg[@]}"
        cf_extra+=(-DWITH_CXX=ON -DCMAKE_CXX_COMPILER="$cxx")
    fi
    configure_args "$c_project" build-cf "${cf_extra[@]}"
    run_checked configure-cf "$cmake" "${cfg[@]}"
    progs=(downstream_c)
    [ -z "$fc" ] || progs+=(downstream_f)
    for prog in "${progs[@]}"; do
        build_and_find build-cf "$prog"
        run_downstream "run-$prog" "$exe"
    done
fi

# ---- 5. another MPI is refused -------------------------------------------------
# other_mpi/ must fail with CairnConfig.cmake's message.
run_refused() {
    configure_args "$other_mpi_project" "build-$1" -DCMAKE_CXX_COMPILER="$cxx" "${@:2}"
    expect_refused "$1" "Cairn was built with another MPI" "${cfg[@]}"
}
if [ -n "$other_mpi_project" ]; then
    mkdir -p "$work_dir/other-mpi/lib"
    : >"$work_dir/other-mpi/lib/libmpi.so"
    run_refused refused-found "-DOTHER_MPI_LIBRARY=$work_dir/other-mpi/lib/libmpi.so"
    if [ -n "$other_mpi_cxx" ]; then
        run_refused refused-findmpi "-DOTHER_MPI_CXX_COMPILER=$other_mpi_cxx"
    else
        echo "install_test: no second MPI installed: not checking that a real one is refused"
    fi
fi

echo "install_test: PASS"

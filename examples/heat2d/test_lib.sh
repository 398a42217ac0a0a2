# Helpers shared by the heat2d test scripts (restart_test.sh, levels_test.sh,
# ../heat2d_f/resume_test.sh, ../heat2d_f/cross_restart_test.sh). Sourced,
# not run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/test_lib.sh"
#
# The sourcing script sets `workdir`, `mpiexec`, `numproc_flag` and the array
# `mpiexec_flags` before it calls them.
# shellcheck shell=bash disable=SC2154

# fail MESSAGE: prints "FAIL: MESSAGE" and ends the test with status 1.
fail() {
    echo "FAIL: $*"
    exit 1
}

# prepare_workdir: empties WORKDIR (each test has its own, so `ctest -j` is
# safe).
prepare_workdir() {
    rm -rf "$workdir"
    mkdir -p "$workdir"
}

# run NAME NP EXE ARGS...: runs EXE ARGS on NP ranks; keeps its standard
# output in WORKDIR/NAME.log and its standard error in WORKDIR/NAME.log.err
# and shows both. Fails the test when EXE exits with a nonzero status or when
# the last line of its standard output is not `digest <16 lowercase hex
# digits>` (the contract of heat2d and heat2d_f).
run() {
    local name=$1 n=$2 exe=$3
    shift 3
    local log=$workdir/$name.log
    echo "+ $mpiexec $numproc_flag $n ${mpiexec_flags[*]} $exe $*"
    local rc=0
    "$mpiexec" "$numproc_flag" "$n" "${mpiexec_flags[@]}" "$exe" "$@" >"$log" 2>"$log.err" || rc=$?
    sed 's/^/  | /' "$log"
    sed 's/^/  ! /' "$log.err"
    [ "$rc" -eq 0 ] || fail "$name exited with status $rc"
    tail -n 1 "$log" | grep -qE '^digest [0-9a-f]{16}$' ||
        fail "the last line of $name's output is not 'digest <16 lowercase hex digits>'"
}

# digest_of NAME: the digest on the last `digest` line of NAME's standard
# output (empty if there is none).
digest_of() {
    grep -E '^digest [0-9a-f]{16}$' "$workdir/$1.log" | tail -n 1 | cut -d' ' -f2
}

# output_has NAME RE: whether NAME's standard output has a line matching the
# extended regular expression RE.
output_has() {
    grep -Eq "$2" "$workdir/$1.log"
}

# check_same_digest A B: fails the test unless runs A and B both printed a
# digest and the two are equal; sets `digest` to it.
check_same_digest() {
    local a b
    a=$(digest_of "$1")
    b=$(digest_of "$2")
    if [ -z "$a" ] || [ -z "$b" ]; then
        fail "a digest line is missing: $1 '$a', $2 '$b'"
    fi
    [ "$a" = "$b" ] || fail "digests differ: $1 '$a', $2 '$b'"
    # shellcheck disable=SC2034 # for the sourcing script
    digest=$a
}

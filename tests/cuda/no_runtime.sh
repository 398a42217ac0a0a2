#!/bin/sh
# Runs a command with every CUDA runtime library of this machine hidden:
# in a mount namespace of its own, /dev/null is bind-mounted over each
# libcudart found by the loader's cache or in the toolkit's library directory
# (the first argument), so that nothing can load it. Needs root (or the
# capability to make mount namespaces): exits 77 (skipped) with the reason
# where that is refused.
#   no_runtime.sh CUDA_LIBRARY_DIR COMMAND [ARGS...]
set -eu
libdir=$1
shift
files=$( { ldconfig -p 2>/dev/null | awk '/libcudart\.so/ {print $NF}'; ls "$libdir"/libcudart.so* 2>/dev/null || true; } |
         while read -r f; do readlink -f "$f"; done | sort -u)
if [ -z "$files" ]; then
    echo "no libcudart found on this machine: nothing to hide, running as is"
fi
if ! unshare --mount --propagation private true 2>/dev/null; then
    echo "SKIP: cannot create a mount namespace here (needs root or CAP_SYS_ADMIN) to hide the CUDA runtime"
    exit 77
fi
exec unshare --mount --propagation private sh -c '
    files=$1; shift
    for f in $files; do
        mount --bind /dev/null "$f" || { echo "FAIL: cannot hide $f"; exit 1; }
        if [ -s "$f" ]; then echo "FAIL: $f is still readable"; exit 1; fi
        echo "hidden: $f"
    done
    exec "$@"' sh "$files" "$@"

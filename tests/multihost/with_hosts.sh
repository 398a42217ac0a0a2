#!/usr/bin/env bash
# with_hosts.sh: run one command against a set of simulated hosts of its own,
# for CTest: starts N hosts in DIR, runs COMMAND with CAIRN_HOSTS_DIR=DIR and
# the launcher first on PATH as `cairn-hosts`, and stops the hosts on every
# way out (also when killed: the hosts end with this script). Exit status:
# COMMAND's; 77 (skipped) with the reason where the machine cannot run hosts;
# 1 if anything of the hosts is left behind. $CAIRN_HOSTS_SKIP, when set, is
# a reason to skip.
#
# usage: with_hosts.sh LAUNCHER DIR N COMMAND [ARGS...]
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
launcher=$(readlink -f "$1") dir=$2 n=$3
shift 3

if [ -n "${CAIRN_HOSTS_SKIP:-}" ]; then
    echo "SKIPPED: $CAIRN_HOSTS_SKIP"
    exit 77
fi
why=$("$launcher" check)
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "SKIPPED: ${why:-cairn-hosts check failed ($rc)}"
    exit 77
fi

rm -rf "$dir"
mkdir -p "$dir"
export CAIRN_HOSTS_DIR=$dir
down() {
    trap - EXIT INT TERM HUP
    local out
    if ! out=$("$launcher" down 2>&1); then
        echo "FAIL: the hosts were not stopped cleanly: $out"
        exit 1
    fi
}
trap 'rc=$?; down; exit $rc' EXIT
trap 'exit 143' INT TERM HUP
"$launcher" up "$n" --owner $$ || exit 1

bin=$dir/bin
ln -sf "$launcher" "$bin/cairn-hosts"
PATH=$bin:$PATH "$@"
rc=$?
down
[ "$rc" -eq 0 ] && echo "with_hosts: passed on $n hosts" || echo "with_hosts: failed with status $rc"
exit "$rc"

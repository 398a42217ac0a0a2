#!/usr/bin/env bash
# launcher_test.sh: checks cairn-hosts itself, run by with_hosts.sh on 2 hosts
# (CAIRN_HOSTS_DIR set, cairn-hosts on PATH): node-local directories are
# private and wipe loses one host's; a job past CAIRN_HOSTS_TIMEOUT is killed
# with status 124 and its processes reaped while the hosts stay usable; an
# unknown host is refused by name.
set -uo pipefail
dir=$CAIRN_HOSTS_DIR local=$CAIRN_HOSTS_DIR/local
fail() { echo "FAIL: $*"; exit 1; }

cairn-hosts exec host1 sh -c "echo one > '$local/mark'" || fail "exec on host1"
[ "$(cairn-hosts exec host1 cat "$local/mark")" = one ] || fail "host1 does not see its own node-local file"
cairn-hosts exec host2 test -e "$local/mark" && fail "host2 sees host1's node-local file"
[ "$(cairn-hosts exec host2 hostname)" = host2 ] || fail "host2's hostname is not host2"
cairn-hosts wipe host1 || fail "wipe host1"
cairn-hosts exec host1 test -e "$local/mark" && fail "host1's node-local file survived wipe"

# A hang: 2 ranks per host sleep past the job's limit.
start=$(date +%s)
CAIRN_HOSTS_TIMEOUT=3 cairn-hosts run 2x2 -- sleep 120
rc=$?
[ "$rc" = 124 ] || fail "a job past its time limit ended with status $rc, not 124"
[ $(($(date +%s) - start)) -lt 60 ] || fail "the job past its limit took $(($(date +%s) - start)) s to end"
for h in host1 host2; do
    # left: the holder's own sleep only (zombies excepted: PID 1 reaps them)
    left=$(cairn-hosts exec "$h" ps -eo stat=,comm= | awk '$1 !~ /^Z/ && $2 == "sleep"' | wc -l)
    [ "$left" = 1 ] || fail "$h still runs $((left - 1)) sleep(s) of the killed job"
done
out=$(cairn-hosts run 1,1 -- hostname) || fail "the hosts are not usable after the killed job"
[ "$(echo "$out" | sort | tr '\n' ' ')" = "host1 host2 " ] || fail "a job after the killed one ran on: $out"

err=$(cairn-hosts run host9:1 -- hostname 2>&1) && fail "a job on an unknown host ran"
echo "$err" | grep -q "no host 'host9'" || fail "an unknown host is not named: $err"
echo "PASS: node-local directories, wipe, a job past its limit, an unknown host"

#!/usr/bin/env bash
# Interrupt a run (SIGINT, as Ctrl-C does) and kill another (SIGKILL), interrupt a
# run with Linux tunnel peers (tap backend), then check
# that neither left a process, network namespace, link or mount behind.
set -uo pipefail
cd "$(dirname "$0")/.."

snapshot() {
    { pgrep -a -f 'ovs-vswitchd|ovsdb-server|dpdk-testpmd' || true
      ip netns list 2>/dev/null
      ip -o link show | awk -F': ' '{print "link " $2}'
      awk '{print "mount " $2}' /proc/mounts | grep -E 'runtime-|/src$' || true; } | sort
}

before=$(snapshot)
status=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The default suite, then (INT-tap) one with Linux tunnel peers, veths and helpers.
for sig in INT KILL INT-tap; do
    args=()
    if [ "$sig" = INT-tap ]; then
        sig=INT
        args=(--backend tap cases/test_kernel_peer.py cases/test_system_traffic.py)
    fi
    # A background job starts with SIGINT ignored; restore it, as a terminal has it.
    setsid python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        ./ovstest suite -q -p no:cacheprovider --out-dir "$out" "${args[@]}" >/dev/null 2>&1 &
    pid=$!
    # Wait until the run has daemons up, then interrupt it mid-case.
    for _ in $(seq 1 200); do pgrep -f -- "$out/" >/dev/null && break; sleep 0.05; done
    sleep 1
    t0=$EPOCHREALTIME
    if [ "$sig" = INT ]; then
        kill -s INT -- "-$pid"   # Ctrl-C reaches the whole foreground process group
    else
        kill -s KILL "$pid"      # only the launcher: its namespace must die with it
    fi
    wait "$pid" 2>/dev/null
    echo "leak_check: SIG$sig: run ended $(python3 -c "print(round($EPOCHREALTIME - $t0, 2))") s after the signal"
    for _ in $(seq 1 100); do [ "$(snapshot)" = "$before" ] && break; sleep 0.1; done
    after=$(snapshot)
    if [ "$after" != "$before" ]; then
        echo "leak_check: SIG$sig left behind:"
        diff <(echo "$before") <(echo "$after") | grep '^>'
        status=1
    else
        echo "leak_check: SIG$sig: nothing left behind"
    fi
done
exit $status

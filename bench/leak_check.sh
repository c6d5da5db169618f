#!/usr/bin/env bash
# Interrupt runs mid-case and check that nothing outlives them:
#   INT  (Ctrl-C) while a DPDK case has testpmd and vhost-user ports up,
#   TERM while an AF_XDP case has its bpffs and XDP sockets,
#   KILL of the launcher alone during the suite (its namespaces must die with it),
#   INT  while Linux tunnel peers (tap backend) have veths and helpers up.
# Afterwards no process may remain in the run's PID namespace, and the host's
# links, mounts (bpffs included), /dev/shm and /dev/hugepages must be as before.
set -uo pipefail
cd "$(dirname "$0")/.."

snapshot() {
    { ip -o link show | awk -F': ' '{print "link " $2}'
      ip -d link show 2>/dev/null | grep -o 'prog/xdp id [0-9]*' | sed 's/^/xdp /'
      awk '{print "mount " $3 " " $2}' /proc/mounts | grep -E 'runtime-|/src$| bpf ' || true
      for d in /dev/shm /dev/hugepages; do [ -d "$d" ] && ls -A "$d" | sed "s|^|file $d/|"; done
    } | sort
}

pidns_of() { ps -o pidns= -p "$1" 2>/dev/null | tr -d ' '; }

# Processes whose PID namespace is $1, as "pid comm".
in_pidns() { ps -e -o pid=,pidns=,comm= | awk -v ns="$1" '$2 == ns {print $1, $3}'; }

before=$(snapshot)
status=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# signal | what to wait for inside the run (a process name) | then wait (s) | selection
rounds=(
    "INT|dpdk-testpmd|1|cases/test_system_dpdk_ping.py -k client_ports"
    "TERM|ping|0|cases/test_system_afxdp.py -k ping"
    "KILL|ovs-vswitchd|1|"
    "INT|ovs-vswitchd|1|--backend tap cases/test_kernel_peer.py cases/test_system_traffic.py"
)
for round in "${rounds[@]}"; do
    IFS='|' read -r sig want delay selection <<<"$round"
    rm -rf "${out:?}"/*
    # A background job starts with SIGINT ignored; restore it, as a terminal has it.
    # shellcheck disable=SC2086
    setsid python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        ./ovstest suite -q -p no:cacheprovider --out-dir "$out" $selection >/dev/null 2>&1 &
    pid=$!
    # The run's PID namespace: that of any process working in its output directory.
    ns=""
    host_ns=$(pidns_of $$)
    for _ in $(seq 1 600); do
        for p in $(pgrep -f -- "$out"); do
            n=$(pidns_of "$p")
            [ -n "$n" ] && [ "$n" != "$host_ns" ] && ns=$n && break
        done
        [ -n "$ns" ] && break
        sleep 0.05
    done
    # Then wait until the resource this round is about exists in it.
    for _ in $(seq 1 1200); do
        [ -n "$ns" ] && in_pidns "$ns" | grep -qw -- "$want" && break
        sleep 0.05
    done
    if [ -z "$ns" ] || ! in_pidns "$ns" | grep -qw -- "$want"; then
        echo "leak_check: SIG$sig: the run never had $want up; cannot check this round"
        kill -s KILL -- "-$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        status=1
        continue
    fi
    sleep "$delay"
    t0=$EPOCHREALTIME
    case "$sig" in
        INT) kill -s INT -- "-$pid" ;;   # Ctrl-C reaches the whole foreground process group
        TERM) pkill -TERM -f -- "-m pytest .*--out-dir=$out" || kill -s TERM "$pid" ;;
        KILL) kill -s KILL "$pid" ;;     # only the launcher: its namespace must die with it
    esac
    wait "$pid" 2>/dev/null
    echo "leak_check: SIG$sig: run ended $(python3 -c "print(round($EPOCHREALTIME - $t0, 2))") s after the signal"
    left=""
    for _ in $(seq 1 100); do
        left=$(in_pidns "$ns")
        [ -z "$left" ] && [ "$(snapshot)" = "$before" ] && break
        sleep 0.1
    done
    after=$(snapshot)
    if [ -n "$left" ] || [ "$after" != "$before" ]; then
        echo "leak_check: SIG$sig left behind:"
        [ -n "$left" ] && echo "$left" | sed 's/^/  process /'
        diff <(echo "$before") <(echo "$after") | grep '^>'
        status=1
    else
        echo "leak_check: SIG$sig: nothing left behind (no process in its PID namespace, host links, mounts, bpffs, /dev/shm as before)"
    fi
done
exit $status

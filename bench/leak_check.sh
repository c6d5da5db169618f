#!/usr/bin/env bash
# Interrupt runs mid-case and check that nothing outlives them:
#   INT  (Ctrl-C) while a DPDK case has testpmd and vhost-user ports up,
#   TERM while an AF_XDP case has its bpffs and XDP sockets,
#   KILL of the launcher alone during the suite (its namespaces must die with it),
#   INT  while Linux tunnel peers (tap backend) have veths and helpers up.
# Afterwards no process may remain in the run's PID namespace, and the host's
# links, mounts (bpffs included), /dev/shm and /dev/hugepages must be as before.
#
# A round signals its run only once the process it is about is up inside it,
# and waits for that as long as the run is alive: collection and the first ids
# take what they take on a loaded machine.  If the run ends first, the round
# says so (exit status, output tail) and tries once more with a selection whose
# first id starts that process at once.  The safety bounds below only keep the
# script from hanging; they are no schedule.
set -uo pipefail
cd "$(dirname "$0")/.."

ARM_LIMIT=${LEAK_CHECK_ARM_LIMIT:-900}  # s a run may take to bring up what a round waits for
END_LIMIT=${LEAK_CHECK_END_LIMIT:-300}  # s a signalled run may take to end

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

# Whether PID namespace $1 has a process named $2 whose command line contains $3
# (a daemon's --pidfile: `ovs-vswitchd --version`, run while collecting, is none).
has_process() {
    ps -e -o pidns=,comm=,args= | awk -v ns="$1" -v comm="$2" -v arg="$3" \
        '$1 == ns && $2 == comm && (arg == "" || index($0, arg)) {found = 1} END {exit !found}'
}

before=$(snapshot)
host_ns=$(pidns_of $$)
status=0
out=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$out" "$log"' EXIT

# Start `./ovstest suite` on a selection in its own session ($pid), output in $log.
start_run() {
    rm -rf "${out:?}"/*
    # A background job starts with SIGINT ignored; restore it, as a terminal has it.
    # shellcheck disable=SC2086
    setsid python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        ./ovstest suite -q -p no:cacheprovider --out-dir "$out" $1 >"$log" 2>&1 &
    pid=$!
}

# Wait until the run has process $1 (command line containing $2) up in its PID
# namespace ($ns), for as long as the run lives (ARM_LIMIT at most).  On failure
# $why says why in one line, and the run is over.
arm() {
    local deadline=$((SECONDS + ARM_LIMIT)) p n rc
    ns="" why=""
    while :; do
        if [ -z "$ns" ]; then  # the run's PID namespace: that of a process using its out dir
            for p in $(pgrep -f -- "$out"); do
                n=$(pidns_of "$p")
                [ -n "$n" ] && [ "$n" != "$host_ns" ] && ns=$n && break
            done
        fi
        [ -n "$ns" ] && has_process "$ns" "$1" "$2" && return 0
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"; rc=$?
            why="the run ended (exit status $rc) before $1 was up"
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            kill -s KILL -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null
            why="$1 was not up after ${ARM_LIMIT} s of a live run (LEAK_CHECK_ARM_LIMIT); killed it"
            return 1
        fi
        sleep 0.05
    done 2>/dev/null  # (bash's job notices)
}

output_tail() { tail -n 8 "$log" | awk '{print "  | " $0}'; }  # a last line without \n too

# signal | the process to wait for inside the run | its command line contains |
#   then wait (s) | selection | the selection to retry with once (its first id
#   starts that process at once)
rounds=(
    "INT|dpdk-testpmd||1|cases/system_dpdk/test_system_dpdk_ping.py -k client_ports|cases/system_dpdk/test_system_dpdk_ping.py -k client_ports"
    "TERM|ping||0|cases/system_afxdp/test_system_afxdp.py -k ping|cases/system_afxdp/test_system_afxdp.py -k ping"
    "KILL|ovs-vswitchd|--pidfile|1|cases/dpif_netdev/test_flows.py cases/dpif_netdev/test_csum_offload.py cases/dpif_netdev/test_tso.py|cases/dpif_netdev/test_flows.py"
    "INT|ovs-vswitchd|--pidfile|1|--backend tap cases/real_ports/test_kernel_peer.py cases/system_userspace/test_system_traffic.py|--backend tap cases/real_ports/test_kernel_peer.py"
)
for round in "${rounds[@]}"; do
    IFS='|' read -r sig want arg delay selection retry <<<"$round"
    start_run "$selection"
    if ! arm "$want" "$arg"; then
        echo "leak_check: SIG$sig: cannot arm this round: $why; output tail:"
        output_tail
        echo "leak_check: SIG$sig: retrying once with: $retry"
        start_run "$retry"
        if ! arm "$want" "$arg"; then
            echo "leak_check: SIG$sig: the run never had $want up; cannot check this round: $why; output tail:"
            output_tail
            status=1
            continue
        fi
    fi
    sleep "$delay"
    if ! kill -0 "$pid" 2>/dev/null; then  # the selection ran out meanwhile
        wait "$pid"; rc=$?
        echo "leak_check: SIG$sig: the run ended (exit status $rc) before the signal; cannot check this round"
        status=1
        continue
    fi
    t0=$EPOCHREALTIME
    case "$sig" in
        INT) kill -s INT -- "-$pid" ;;   # Ctrl-C reaches the whole foreground process group
        TERM) pkill -TERM -f -- "-m pytest .*--out-dir=$out" || kill -s TERM "$pid" ;;
        KILL) kill -s KILL "$pid" ;;     # only the launcher: its namespace must die with it
    esac
    # Its end (within 20 ms), or the safety bound's.
    deadline=$((SECONDS + END_LIMIT))
    { while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.02; done
    } 2>/dev/null  # and not bash's "Killed" notice of the launcher's job
    took=$(python3 -c "print(round($EPOCHREALTIME - $t0, 2))")
    if kill -0 "$pid" 2>/dev/null; then
        echo "leak_check: SIG$sig: the run did not end within ${END_LIMIT} s of the signal (LEAK_CHECK_END_LIMIT); killing it"
        kill -s KILL -- "-$pid" 2>/dev/null
        status=1
    else
        echo "leak_check: SIG$sig: run ended $took s after the signal"
    fi
    wait "$pid" 2>/dev/null
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

"""Standalone reproducer scripts: a failing case as a shell script that needs only OVS.

`reproducer(case)` is a pure function from a CaseRecord to the text of a bash
script.  The script makes its own run directory, starts ovsdb-server and
ovs-vswitchd there (dummy datapath, as the sandbox does), replays the case's
transcript in order (ovs-vsctl, ovs-ofctl, ovs-appctl, with the sandbox's paths
rewritten to its own), prints what left each captured port next to what the
model expected, and stops the daemons.  Exit status: 0 if every captured port
saw exactly the expected frames, 1 if not (the failure reproduced), 2 if OVS
could not be started.
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from evidence import pcap
from harness.records import CaseRecord

RUN_VAR = '"$RUN"'
# Commands the script's own start-up replaces.
_SETUP_TOOLS = ("ovsdb-tool",)
_PCAP_OPTION = re.compile(r"^options:(tx_pcap|pcap)=(.*)$")
MAX_COMMENT_LINES = 12

# The reproducer's pcap reader is evidence/pcap.py itself, run alone (its main():
# one hex line per complete frame, one line on stderr for a malformed file).
PCAP_PY = Path(pcap.__file__).read_text()


def find_rundir(case: CaseRecord) -> str | None:
    """The sandbox run directory the transcript used, from --db=unix:DIR/db.sock."""
    for command in case.commands:
        for arg in command.argv:
            match = re.fullmatch(r"--db=unix:(.+)/db\.sock", arg)
            if match:
                return match.group(1)
    for command in case.commands:
        argv = command.argv
        if len(argv) >= 3 and os.path.basename(argv[0]) == "ovsdb-tool" and argv[1] == "create":
            return os.path.dirname(argv[2])
    return None


def _schema(case: CaseRecord) -> str:
    for command in case.commands:
        argv = command.argv
        if len(argv) >= 4 and os.path.basename(argv[0]) == "ovsdb-tool" and argv[1] == "create":
            return argv[3]
    return ""


def _inside(path: str, rundir: str) -> bool:
    return path == rundir or path.startswith(rundir.rstrip("/") + "/")


def shell_word(arg: str, rundir: str | None) -> str:
    """Quote one argument for the script, with the run directory as "$RUN"."""
    if not rundir or not rundir.rstrip("/"):
        return shlex.quote(arg)
    parts = re.split(re.escape(rundir.rstrip("/")) + r"(?=/|$)", arg)
    if len(parts) == 1:
        return shlex.quote(arg)
    return RUN_VAR.join(shlex.quote(p) if p else "" for p in parts)


def replayed_commands(case: CaseRecord) -> list[tuple[list[str], int]]:
    """(argv with the tool by its name, recorded exit status) of each command to replay."""
    out = []
    for command in case.commands:
        if not command.argv:
            continue
        tool = os.path.basename(command.argv[0])
        rest = list(command.argv[1:])
        if tool in _SETUP_TOOLS:
            continue
        if tool == "ovs-vsctl" and "init" in rest and "--no-wait" in rest:
            continue  # the script's own start-up initialises the database
        out.append(([tool, *rest], int(command.rc)))
    return out


def captured_ports(case: CaseRecord) -> dict[str, str]:
    """port -> capture file, from `set Interface PORT ... options:tx_pcap=FILE`."""
    ports: dict[str, str] = {}
    for command in case.commands:
        argv = command.argv
        interface = None
        for i, arg in enumerate(argv):
            if arg.lower() == "interface" and i + 1 < len(argv):
                interface = argv[i + 1]
            match = _PCAP_OPTION.match(arg)
            if match and interface:
                ports[interface] = match.group(2)
    return ports


def expected_frames(case: CaseRecord) -> dict[str, list[str]]:
    """port -> the frames the model expected there, over all steps, in order."""
    frames: dict[str, list[str]] = {}
    for step in case.steps:
        if step.tx_port:
            frames.setdefault(step.tx_port, []).extend(step.expected)
    return frames


def _comment(text: str) -> list[str]:
    lines = text.strip().splitlines()
    shown = lines[:MAX_COMMENT_LINES]
    out = [f"#   {line}".rstrip() for line in shown]
    if len(lines) > len(shown):
        out.append(f"#   ... {len(lines) - len(shown)} more lines in the report")
    return out


def reproducer(case: CaseRecord, versions: dict[str, str] | None = None) -> str | None:
    """The script's text, or None when the case ran no commands (nothing to replay)."""
    commands = replayed_commands(case)
    if not commands:
        return None
    rundir = find_rundir(case)
    ports = captured_ports(case)
    expected = expected_frames(case)
    versions = versions or {}
    out = [
        "#!/usr/bin/env bash",
        f"# Reproducer for {case.nodeid}",
        f"# outcome: {case.outcome}" + (f"; upstream: {case.upstream}" if case.upstream else ""),
    ]
    if versions:
        out.append("# recorded with: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    if case.longrepr.strip():
        out += ["# failure:", *_comment(case.longrepr)]
    out += [
        "#",
        "# Needs only an Open vSwitch install (ovsdb-server, ovs-vswitchd, ovs-vsctl, ovs-ofctl,",
        "# ovs-appctl, ovsdb-tool); no root.  Usage: bash THIS_SCRIPT [RUN_DIR] [-v]",
        "#   OVS_BINDIR=DIR     use the OVS programs in DIR (an install prefix, its bin/ or sbin/,",
        "#                      or a build tree)",
        "#   OVS_SCHEMA=FILE    vswitch.ovsschema, if it is not found by itself",
        "# Exit status: 0 captured frames as expected, 1 they differ, 2 OVS did not start.",
        "set -u",
        _PRELUDE.strip("\n"),
        "",
        f"RECORDED_SCHEMA={shlex.quote(_schema(case))}",
        _START.strip("\n"),
    ]
    # Database settings the case made before ovs-vswitchd started (some, such as
    # userspace-tso-enable, are read only at start) go in before it starts here too.
    pre = 0
    while pre < len(commands) and commands[pre][0][0] == "ovs-vsctl" \
            and "--no-wait" in commands[pre][0]:
        pre += 1
    for argv, rc in commands[:pre]:
        out.append(f"run {rc} " + " ".join(shell_word(a, rundir) for a in argv))
    out += [_START_VSWITCHD.strip("\n"), "", "# ---- the case's commands, in the order the test ran them"]
    commands = commands[pre:]
    for path in sorted(set(ports.values())):  # netdev-dummy appends: start from empty files
        if rundir and _inside(path, rundir):
            out.append(f"rm -f {shell_word(path, rundir)}")
    for argv, rc in commands:
        out.append(f"run {rc} " + " ".join(shell_word(a, rundir) for a in argv))
    out += ["", "# ---- what left each captured port, next to what was expected", "status=0"]
    for port in sorted(expected):
        path = shell_word(ports[port], rundir) if port in ports else "''"
        words = " ".join(shlex.quote(h) for h in expected[port])
        out.append(f"compare_port {shlex.quote(port)} {path} {words}".rstrip())
    for port in sorted(set(ports) - set(expected)):
        out.append(f"show_port {shlex.quote(port)} {shell_word(ports[port], rundir)}")
    if not ports and not expected:
        out.append('echo "this case captured no port; see the command output above"')
    out += ['echo "run directory (logs, database, pcaps): $RUN"', "exit $status", ""]
    return "\n".join(out)


_PRELUDE = r'''
VERBOSE=0
RUN=""
for arg in "$@"; do
    case "$arg" in
        -v) VERBOSE=1 ;;
        *) RUN="$arg" ;;
    esac
done
if [ -n "${OVS_BINDIR:-}" ]; then
    # An install prefix, its bin/ or sbin/, or a build tree (its libtool wrappers run in place).
    PATH="$OVS_BINDIR:$OVS_BINDIR/sbin:$OVS_BINDIR/bin:$OVS_BINDIR/../sbin:$OVS_BINDIR/../bin:$OVS_BINDIR/utilities:$OVS_BINDIR/vswitchd:$OVS_BINDIR/ovsdb:$PATH"
fi
for tool in ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-appctl ovs-ofctl; do
    command -v "$tool" >/dev/null || { echo "error: $tool not found (set OVS_BINDIR)" >&2; exit 2; }
done
if [ -z "$RUN" ]; then
    RUN=$(mktemp -d "${TMPDIR:-/tmp}/ovs-repro.XXXXXX") || exit 2
fi
mkdir -p "$RUN" && RUN=$(cd "$RUN" && pwd) || exit 2
export OVS_RUNDIR="$RUN" OVS_LOGDIR="$RUN" OVS_DBDIR="$RUN" OVS_SYSCONFDIR="$RUN"

run() {  # run EXPECTED_STATUS CMD...: run one recorded command, say when it behaves differently
    local want=$1 rc out
    shift
    echo "\$ $*"
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" != "$want" ]; then
        echo "  !! exit status $rc; the test saw $want"
        [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/  | /'
    elif [ "$VERBOSE" = 1 ] && [ -n "$out" ]; then
        printf '%s\n' "$out" | sed 's/^/  | /'
    fi
    return 0
}

pcap_hex() {  # one hex line per frame of a pcap file
    [ -s "$1" ] || return 0
    if command -v python3 >/dev/null; then
        python3 -c "$PCAP_PY" "$1"
    elif command -v ovs-pcap >/dev/null; then
        ovs-pcap "$1"
    else
        echo "(no python3 or ovs-pcap: raw file follows, 24-byte header then 16-byte records)"
        od -An -tx1 -v "$1" | tr -d ' \n'
        echo
    fi
}

compare_port() {  # compare_port PORT PCAP EXPECTED_HEX...: print both, set status
    local port=$1 file=$2 i tries=0
    shift 2
    local -a want=("$@") got=()
    while :; do
        got=()
        if [ -n "$file" ]; then mapfile -t got < <(pcap_hex "$file"); fi
        [ "${#got[@]}" -ge "${#want[@]}" ] || [ "$tries" -ge 50 ] && break
        tries=$((tries + 1))
        sleep 0.1
    done
    echo "== $port: expected ${#want[@]} frame(s), captured ${#got[@]}${file:+ ($file)}"
    local n=${#want[@]}
    [ "${#got[@]}" -gt "$n" ] && n=${#got[@]}
    for ((i = 0; i < n; i++)); do
        local w=${want[i]:-} g=${got[i]:-} verdict=same
        [ "$w" = "$g" ] || { verdict=DIFFERS; status=1; }
        echo "frame $i: $verdict"
        echo "  expected: ${w:-(none)}"
        echo "  captured: ${g:-(none)}"
    done
}

show_port() {  # show_port PORT PCAP: what left a port the test did not check
    local -a got=()
    mapfile -t got < <(pcap_hex "$2")
    echo "== $1 (not checked by the test): captured ${#got[@]} frame(s) ($2)"
    local i
    for ((i = 0; i < ${#got[@]}; i++)); do echo "  captured: ${got[i]}"; done
}

stop_daemons() {
    local daemon
    for daemon in ovs-vswitchd ovsdb-server; do
        [ -f "$RUN/$daemon.pid" ] || continue
        if [ "$daemon" = ovs-vswitchd ]; then
            ovs-appctl -t ovs-vswitchd exit --cleanup >/dev/null 2>&1
        else
            ovs-appctl -t ovsdb-server exit >/dev/null 2>&1
        fi
        for _ in $(seq 50); do [ -f "$RUN/$daemon.pid" ] || break; sleep 0.1; done
        if [ -f "$RUN/$daemon.pid" ]; then
            kill "$(cat "$RUN/$daemon.pid")" 2>/dev/null
            rm -f "$RUN/$daemon.pid"
        fi
    done
}
trap stop_daemons EXIT
'''

_START = r'''
SCHEMA=${OVS_SCHEMA:-}
if [ -z "$SCHEMA" ]; then
    for candidate in "$RECORDED_SCHEMA" "${OVS_PKGDATADIR:-}/vswitch.ovsschema" \
            "${OVS_BINDIR:-}/vswitchd/vswitch.ovsschema" \
            "${OVS_BINDIR:-}/../share/openvswitch/vswitch.ovsschema" \
            "${OVS_BINDIR:-}/share/openvswitch/vswitch.ovsschema" \
            /usr/share/openvswitch/vswitch.ovsschema \
            /usr/local/share/openvswitch/vswitch.ovsschema; do
        if [ -f "$candidate" ]; then SCHEMA=$candidate; break; fi
    done
fi
[ -f "$SCHEMA" ] || { echo "error: vswitch.ovsschema not found (set OVS_SCHEMA)" >&2; exit 2; }

echo "# run directory: $RUN"
rm -f "$RUN/conf.db"
ovsdb-tool create "$RUN/conf.db" "$SCHEMA" || exit 2
ovsdb-server --detach --no-chdir --pidfile --log-file --remote=punix:"$RUN/db.sock" \
    -vconsole:off "$RUN/conf.db" || exit 2
ovs-vsctl --timeout=10 --no-wait init || exit 2
'''

# Plain --enable-dummy, as the sandbox (and upstream by default): =override would
# turn tunnel and tap ports into dummies.
_START_VSWITCHD = r'''
ovs-vswitchd --enable-dummy --disable-system --disable-system-route \
    --detach --no-chdir --pidfile --log-file -vvconn -vofproto_dpif -vunixctl \
    -vconsole:off || { echo "error: ovs-vswitchd did not start; see $RUN/ovs-vswitchd.log" >&2; exit 2; }
'''

# The pcap reader is defined before the functions that use it.
_PRELUDE = "PCAP_PY=" + shlex.quote(PCAP_PY.strip("\n") + "\n") + "\n" + _PRELUDE

"""Reproducer scripts: the pure generator, the script run against stand-in OVS tools
(no OVS needed), and a generated script run against the real OVS for an injected failure.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evidence.pcap import pcap_bytes
from harness.records import CaseRecord, Command, RunRecord, Step
from reports.repro import captured_ports, expected_frames, find_rundir, replayed_commands, reproducer

pytest_plugins = ["pytester"]

SANDBOX = "/checkout/reports/out/cases/cases_test_x.py_test_fwd_tx_ip_"  # as a test run recorded it
# Ethernet / IPv4 127.0.0.1 -> 127.0.0.1 / UDP 1 -> 2, payload "hi"; IP checksum 0x7ccc.
SENT = ("ffffffffffff000000000001" "0800" "4500001e000100004011" "7ccc" "7f0000017f000001"
        "0001000200" "0a" "0000" "6869")
GOT = SENT.replace("7ccc", "1234")
ODD_ARG = "weird 'arg' with $(touch pwned) and \"quotes\""


def _cmd(*argv: str, rc: int = 0) -> Command:
    return Command(list(argv), rc, "", "", 0.001)


def _case(expected: str = SENT) -> CaseRecord:
    vsctl = ["/usr/bin/ovs-vsctl", "--timeout=10", f"--db=unix:{SANDBOX}/db.sock"]
    return CaseRecord(
        nodeid="cases/test_x.py::test_fwd[tx_ip]", outcome="failed",
        longrepr="E   FrameMismatch\nE   IP.chksum",
        commands=[
            _cmd("/usr/bin/ovsdb-tool", "create", f"{SANDBOX}/conf.db",
                 "/usr/share/openvswitch/vswitch.ovsschema"),
            _cmd(*vsctl, "--no-wait", "init"),
            _cmd(*vsctl, "add-br", "br1", "--", "set", "bridge", "br1", "datapath-type=dummy"),
            _cmd(*vsctl, "add-port", "br1", "p2", "--", "set", "Interface", "p2", "type=dummy",
                 f"options:tx_pcap={SANDBOX}/p2-tx.pcap"),
            _cmd("/usr/bin/ovs-ofctl", "add-flow", "br1", "in_port=p1,actions=output:p2"),
            _cmd("ovs-appctl", "vlog/set", ODD_ARG, rc=2),
            _cmd("ovs-appctl", "netdev-dummy/receive", "p1", SENT),
        ],
        steps=[Step("fwd", "p1", "p2", [SENT], [expected], [GOT], expected == GOT)],
    )


def test_generator_rewrites_paths_and_keeps_the_order() -> None:
    case = _case()
    assert find_rundir(case) == SANDBOX
    tools = [argv[0] for argv, _ in replayed_commands(case)]
    assert tools == ["ovs-vsctl", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ovs-appctl"]
    assert replayed_commands(case)[3][1] == 2  # the recorded exit status travels along
    assert captured_ports(case) == {"p2": f"{SANDBOX}/p2-tx.pcap"}
    assert expected_frames(case) == {"p2": [SENT]}
    script = reproducer(case, {"ovs": "4.0.0"}) or ""
    assert SANDBOX not in script and "/usr/bin/ovs-" not in script
    assert 'run 0 ovs-vsctl --timeout=10 --db=unix:"$RUN"/db.sock add-br br1' in script
    assert 'options:tx_pcap="$RUN"/p2-tx.pcap' in script
    assert f"compare_port p2 \"$RUN\"/p2-tx.pcap {SENT}" in script
    assert "# recorded with: ovs 4.0.0" in script and "#   E   FrameMismatch" in script
    lines = script.splitlines()
    order = [next(i for i, line in enumerate(lines) if needle in line)
             for needle in ("ovs-vswitchd --enable-dummy --disable-system", "add-br br1", "add-port br1 p2",
                            "add-flow br1", "vlog/set", "netdev-dummy/receive", "compare_port p2")]
    assert order == sorted(order)
    assert not any(line.startswith("run") and "ovsdb-tool" in line for line in lines)
    assert bash_syntax_ok(script)


def test_generator_has_nothing_to_replay_without_commands() -> None:
    assert reproducer(CaseRecord(nodeid="t.py::x", outcome="error")) is None


def bash_syntax_ok(script: str) -> bool:
    return subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0


def _pcap(frames_hex: list[str]) -> bytes:
    return pcap_bytes(bytes.fromhex(frame) for frame in frames_hex)


STUB = r'''#!/bin/sh
# Stand-in for an OVS tool: log the call; emulate daemons, exit and the datapath.
tool=$(basename "$0")
printf '%s' "$tool" >> "$STUB_LOG"
for a in "$@"; do printf '\037%s' "$a" >> "$STUB_LOG"; done
printf '\n' >> "$STUB_LOG"
case "$tool $*" in
    "ovsdb-server"*|"ovs-vswitchd"*) echo 999999 > "$OVS_RUNDIR/$tool.pid" ;;
    "ovs-appctl -t ovs-vswitchd exit"*) rm -f "$OVS_RUNDIR/ovs-vswitchd.pid" ;;
    "ovs-appctl -t ovsdb-server exit"*) rm -f "$OVS_RUNDIR/ovsdb-server.pid" ;;
    "ovs-appctl netdev-dummy/receive"*) cp "$STUB_CAPTURE" "$OVS_RUNDIR/p2-tx.pcap" ;;
    "ovs-appctl vlog/set"*) echo "no such module" >&2; exit 2 ;;
esac
exit 0
'''


def _run_with_stubs(tmp_path: Path,
                    case: CaseRecord) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl"):
        (bindir / tool).write_text(STUB)
        (bindir / tool).chmod(0o755)
    schema = tmp_path / "vswitch.ovsschema"
    schema.write_text("{}")
    capture = tmp_path / "capture.pcap"
    capture.write_bytes(_pcap([GOT]))
    script = tmp_path / "repro.sh"
    script.write_text(reproducer(case) or "")
    run = tmp_path / "run"
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "calls"),
           "STUB_CAPTURE": str(capture), "OVS_SCHEMA": str(schema), "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(script), str(run)], env=env, capture_output=True, text=True,
                          timeout=60)
    calls = [line.split("\x1f") for line in (tmp_path / "calls").read_text().splitlines()]
    return proc, calls


def test_script_replays_and_prints_what_left(tmp_path: Path) -> None:
    proc, calls = _run_with_stubs(tmp_path, _case())
    run = str(tmp_path / "run")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # frames differ: the failure reproduced
    assert f"== p2: expected 1 frame(s), captured 1 ({run}/p2-tx.pcap)" in proc.stdout
    assert re.search(rf"frame 0: DIFFERS\n  expected: {SENT}\n  captured: {GOT}\n", proc.stdout)
    assert "!!" not in proc.stdout  # vlog/set failed, as it did in the test
    tools = [c[0] for c in calls]
    assert tools[:4] == ["ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-vswitchd"]
    assert calls[4] == ["ovs-vsctl", "--timeout=10", f"--db=unix:{run}/db.sock", "add-br", "br1", "--", "set",
                        "bridge", "br1", "datapath-type=dummy"]
    assert calls[5][-1] == f"options:tx_pcap={run}/p2-tx.pcap"
    assert calls[7] == ["ovs-appctl", "vlog/set", ODD_ARG]  # quoting survives the round trip
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    assert calls[8] == ["ovs-appctl", "netdev-dummy/receive", "p1", SENT]
    assert calls[-2:] == [["ovs-appctl", "-t", "ovs-vswitchd", "exit", "--cleanup"],
                          ["ovs-appctl", "-t", "ovsdb-server", "exit"]]
    assert not list((tmp_path / "run").glob("*.pid"))


def test_script_exit_zero_when_frames_match(tmp_path: Path) -> None:
    case = _case(expected=GOT)
    case.commands[5].rc = 0  # now the recorded status differs from what the stub returns
    proc, _ = _run_with_stubs(tmp_path, case)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "frame 0: same" in proc.stdout
    assert "  !! exit status 2; the test saw 0\n  | no such module" in proc.stdout


INJECTED = '''
import pytest
from datapath.model import Expected
from harness.control import check
from datapath.expect import send_and_expect

SENT = bytes.fromhex("{sent}")


@pytest.mark.upstream("dpif-netdev - ip csum offload")
def test_injected_failure(two_ports):
    """The flow rewrites nw_dst, but the expectation says the frame leaves unchanged."""
    check(two_ports.sb.ofctl("add-flow", "br1", "in_port=p1,actions=mod_nw_dst:192.168.1.1,output:p2"))
    send_and_expect(two_ports.p1, [SENT], two_ports.p2, Expected(frames=[SENT]),
                    title="injected mismatch", steps=two_ports.steps)
'''


def _framework_plugins() -> list[str]:
    """The plugins the checkout's conftest.py loads, so the inner run has every fixture."""
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("_checkout_conftest", root / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.pytest_plugins)


def _real_ovs() -> str:
    from harness.install import InstallError, OvsInstall
    try:
        install = OvsInstall.locate(os.environ.get("OVS_BINDIR"))
    except InstallError as exc:
        pytest.skip(f"needs Open vSwitch (run through ./ovstest): {exc}")
    return str(install.tools["ovs-vswitchd"].parent)


def test_injected_failure_is_explained_and_reproduced(pytester: pytest.Pytester, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = _real_ovs()
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    pytester.makepyfile(test_injected=INJECTED.format(sent=SENT))
    plugins = [arg for name in _framework_plugins() for arg in ("-p", name)]
    result = pytester.runpytest_subprocess(*plugins, "-p", "no:cacheprovider",
                                           "--ovs-bindir", bindir, "--out-dir", "out")
    assert result.ret == 1, result.stdout.str()
    out = pytester.path / "out"
    page = next((out / "case").glob("test_injected_failure*.html")).read_text()
    record = RunRecord.load(str(out / "results.json")).cases[0]
    assert record.outcome == "failed" and record.steps[0].sent == [SENT]
    got = record.steps[0].captured[0]
    assert got != SENT and got in page
    # the page explains it: the field, its layer, the frames, tshark's verdict, logs, pcaps
    assert "IP.dst: expected 127.0.0.1, got 192.168.1.1" in page
    assert re.search(r'<td class="d">127\.0\.0\.1</td><td class="d">192\.168\.1\.1</td>', page)
    assert "tshark on the captured frames" in page or "no dissection" in page
    if shutil.which("tshark"):
        assert re.search(r'ip\.checksum 0x[0-9a-f]+ <span class="o o-good">good</span>', page)
    assert "netdev-dummy/receive p1 " + SENT in page
    assert "|bridge|INFO|" in page or "|INFO|" in page  # ovs-vswitchd log lines of the case
    for kind in ("sent", "expected", "captured"):
        link = re.search(rf'href="\.\./(pcap/[^"]+step1-{kind}\.pcap)"', page)
        assert link and (out / link.group(1)).stat().st_size > 24
    assert re.search(r'href="\.\./cases/[^"]+/ovs-vswitchd\.log"', page)
    repro = next((out / "repro").glob("test_injected_failure*.sh"))
    run_dir = tmp_path / "repro-run"
    proc = subprocess.run(["bash", str(repro), str(run_dir)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OVS_BINDIR": bindir})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"  expected: {SENT}\n  captured: {got}\n" in proc.stdout
    assert not list(run_dir.glob("*.pid")), "the reproducer left a daemon running"


def test_settings_read_at_start_come_before_vswitchd() -> None:
    """userspace-tso-enable is read only when ovs-vswitchd starts: the reproducer
    must set it first, and must not start vswitchd with dummy overriding tunnels."""
    run = "/out/cases/x"
    case = CaseRecord(nodeid="cases/dpif_netdev/test_tso.py::test_tso[in4]", outcome="failed", commands=[
        _cmd("/usr/bin/ovsdb-tool", "create", f"{run}/conf.db", "/usr/share/openvswitch/vswitch.ovsschema"),
        _cmd("/usr/bin/ovs-vsctl", "--timeout=10", f"--db=unix:{run}/db.sock", "--no-wait", "init"),
        _cmd("/usr/bin/ovs-vsctl", "--timeout=10", f"--db=unix:{run}/db.sock", "--no-wait", "set",
             "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"),
        _cmd("/usr/bin/ovs-vsctl", "--timeout=10", f"--db=unix:{run}/db.sock", "add-br", "br1"),
    ])
    script = reproducer(case)
    assert script is not None
    tso = script.index("other_config:userspace-tso-enable=true")
    start = script.index("ovs-vswitchd --enable-dummy --disable-system")
    assert tso < start < script.index("add-br br1")
    assert "--enable-dummy=override" not in script
    assert bash_syntax_ok(script)

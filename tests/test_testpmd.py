"""The testpmd shell: its typed API, its errors, and a real dpdk-testpmd.

A fake testpmd (a small script speaking the same prompt protocol) checks what
the API does when testpmd misbehaves: no prompt, an early exit, a refusal.
The real one runs with two net_null ports (no OVS needed) when it exists.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from datapath.backends.testpmd import (
    CsumLayer,
    CsumMode,
    FwdMode,
    PromptTimeout,
    TestPmd,
    TestPmdError,
    parse_csum_show,
    parse_offloads,
    parse_port_info,
    parse_port_stats,
)

STATS = """
  ######################## NIC statistics for port 0  ########################
  RX-packets: 7414816    RX-missed: 3          RX-bytes:  474548224
  RX-errors: 1
  RX-nombuf:  2
  TX-packets: 6955040    TX-errors: 0          TX-bytes:  445122560

  Throughput (since last show)
  Rx-pps:            0          Rx-bps:            0
  ############################################################################
"""
INFO = """
********************* Infos for port 0  *********************
MAC address: CA:20:A5:92:D9:41
Device name: net_virtio_user0
Driver name: net_virtio_user
Link status: up
MTU: 1500
VLAN offload:
  strip off, filter off, extend off, qinq strip off
"""
CSUM = """Parse tunnel is off
IP checksum offload is sw
UDP checksum offload is hw
TCP checksum offload is hw
SCTP checksum offload is sw
Outer-Ip checksum offload is sw
Outer-Udp checksum offload is sw
"""

FAKE = r'''
import sys, time
mode = sys.argv[-1]
print("EAL: Detected 2 lcore(s)", flush=True)
if mode == "no-prompt":
    time.sleep(60)
if mode == "die":
    print("EAL: Error - exiting with code: 1", flush=True)
    sys.exit(1)
started = False
while True:
    sys.stdout.write("testpmd> "); sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        break
    cmd = line.strip()
    if cmd == "quit":
        print("Bye...", flush=True)
        break
    if cmd == "start":
        started = True
        print("io packet forwarding - ports=2")
    elif cmd == "stop":
        started = False
        print("Telling cores to stop...")
    elif cmd.startswith("csum set") and started:
        print("Please stop port 0 first")
    elif cmd == "show port stats 0":
        print(%r)
    elif cmd == "hang":
        time.sleep(60)
    elif cmd == "crash":
        sys.exit(3)
    else:
        print("Command not found")
''' % STATS


@pytest.fixture
def fake_testpmd(tmp_path: Path):  # type: ignore[no-untyped-def]
    script = tmp_path / "fake-testpmd"
    script.write_text(f"#!{sys.executable}\n{FAKE}")
    script.chmod(0o755)
    made: list[TestPmd] = []

    def make(mode: str = "ok", **kwargs: float) -> TestPmd:
        pmd = TestPmd([], [mode], binary=str(script), **kwargs)  # type: ignore[arg-type]
        made.append(pmd)
        return pmd
    yield make
    for pmd in made:
        pmd.quit()


def test_parsers() -> None:
    stats = parse_port_stats(STATS)
    assert (stats.rx_packets, stats.rx_missed, stats.rx_bytes, stats.rx_errors,
            stats.rx_nombuf, stats.tx_packets, stats.tx_errors, stats.tx_bytes) == (
        7414816, 3, 474548224, 1, 2, 6955040, 0, 445122560)
    info = parse_port_info(0, INFO)
    assert (info.mac, info.device, info.driver, info.link_up, info.mtu) == (
        "ca:20:a5:92:d9:41", "net_virtio_user0", "net_virtio_user", True, 1500)
    assert parse_csum_show(CSUM) == {"IP": "sw", "UDP": "hw", "TCP": "hw", "SCTP": "sw",
                                     "OUTER-IP": "sw", "OUTER-UDP": "sw"}
    assert parse_offloads("Tx Offloading Capabilities of port 0 :\n  Per Queue :\n"
                          "  Per Port  : VLAN_INSERT UDP_CKSUM TCP_CKSUM MULTI_SEGS\n") == {
        "VLAN_INSERT", "UDP_CKSUM", "TCP_CKSUM", "MULTI_SEGS"}
    with pytest.raises(TestPmdError, match="no RX-packets"):
        parse_port_stats("Invalid port 7")
    with pytest.raises(TestPmdError, match="no port info"):
        parse_port_info(7, "Invalid port 7")


def test_commands_and_refusals(fake_testpmd) -> None:
    pmd = fake_testpmd().start()
    assert pmd.port_stats(0).rx_packets == 7414816
    pmd.start_forwarding()
    with pytest.raises(TestPmdError, match=r"refused 'csum set tcp hw 0':\nPlease stop port 0"):
        pmd.set_csum(0, "tcp", "hw")
    with pytest.raises(TestPmdError, match="Command not found"):
        pmd.send_command("bogus")
    assert pmd.send_command("bogus", check=False) == "Command not found"
    assert [c for c, _ in pmd.transcript][:2] == ["show port stats 0", "start"]
    with pytest.raises(ValueError):
        pmd.set_csum(0, CsumLayer.TCP, "maybe")  # type: ignore[arg-type]
    pid = pmd.pid
    pmd.quit()
    assert not pmd.alive() and pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_no_prompt_is_a_clear_timeout(fake_testpmd) -> None:
    pmd = fake_testpmd("no-prompt", start_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(PromptTimeout) as info:
        pmd.start()
    assert time.monotonic() - started < 5
    text = str(info.value)
    assert "no 'testpmd>' prompt within 0.5 s after '(start)'" in text
    assert "EAL: Detected 2 lcore(s)" in text  # what testpmd printed last


def test_command_that_hangs_times_out(fake_testpmd) -> None:
    pmd = fake_testpmd(timeout=0.5).start()
    with pytest.raises(PromptTimeout, match=r"within 0.5 s after 'hang'"):
        pmd.send_command("hang")


def test_exit_is_reported_with_its_output(fake_testpmd) -> None:
    with pytest.raises(TestPmdError, match=r"exited .*'\(start\)'[\s\S]*exiting with code: 1"):
        fake_testpmd("die").start()
    pmd = fake_testpmd().start()
    with pytest.raises(TestPmdError, match="exited"):
        pmd.send_command("crash")


def test_not_started_is_an_error() -> None:
    with pytest.raises(TestPmdError, match="not running"):
        TestPmd([]).send_command("show port info 0")


def _real_testpmd_reason() -> str | None:
    if shutil.which("dpdk-testpmd") is None:
        return "dpdk-testpmd not installed"
    if os.geteuid() != 0:
        return "dpdk-testpmd needs root here"
    return None


@pytest.mark.skipif(_real_testpmd_reason() is not None, reason=str(_real_testpmd_reason()))
def test_real_testpmd_with_null_ports() -> None:
    """A real dpdk-testpmd (no hugepages, two net_null ports): forwarding counts
    packets, port info names the driver, an offload net_null lacks is an error,
    and quit leaves no process."""
    pmd = TestPmd(["--no-huge", "-m", "512", "--in-memory", "--no-pci", "-l", "0-1",
                   "--vdev=net_null0", "--vdev=net_null1"], ["--total-num-mbufs=8192"])
    with pmd:
        info = pmd.port_info(0)
        assert info.driver == "net_null" and info.link_up
        pmd.start_forwarding(FwdMode.IO)
        deadline = time.monotonic() + 5
        while pmd.port_stats(0).rx_packets == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pmd.port_stats(0).rx_packets > 0
        assert "Forward statistics for port 0" in pmd.stop_forwarding()
        pmd.stop_port(0)
        pmd.set_csum(0, CsumLayer.IP, CsumMode.SW)
        assert pmd.csum_show(0)["IP"] is CsumMode.SW
        with pytest.raises(TestPmdError, match="not supported"):
            pmd.set_csum(0, CsumLayer.TCP, CsumMode.HW)  # net_null has no TCP checksum offload
        with pytest.raises(TestPmdError, match="not supported"):
            pmd.set_tso(0, 1400)
        pmd.start_port(0)
        pid = pmd.pid
    assert pid is not None and not pmd.alive()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
